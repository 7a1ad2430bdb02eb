/** The command's name (package.json "bin"), used where the tool is named ("unknown command ... for "rcb""). */
export const CLI_NAME = "rcb";
/**
 * How every help text, hint and doc shows a command to run: `npx rcb ...`. After `npm ci` the
 * project's own "bin" is not on PATH (npm links the bins of dependencies only), while `npx`, run
 * in the project folder, runs it with no install and no network.
 */
export const CLI_RUN = `npx ${CLI_NAME}`;
