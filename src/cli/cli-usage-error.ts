/** A mistake in the command line (exit 2, with the command's usage). */
export class CliUsageError extends Error {}
