/** Types for the `votifier2` npm package (NuVotifier's JavaScript v2 client), which ships none. */
declare module "votifier2" {
  interface VotifierClientOptions {
    host: string;
    port: number;
    token: string;
    vote: { serviceName: string; username: string; address: string; timestamp: number };
  }
  function vote(options: VotifierClientOptions, callback: (error: Error | null) => void): void;
  export = vote;
}
