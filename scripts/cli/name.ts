/** The command's name (package.json "bin"), used in help texts and hints. */
export const CLI_NAME = "rcb";
