/**
 * Where the server says what happened: one logger, handed from the composition root to every
 * part that speaks (nothing writes to the console on its own). `warn` for what an operator
 * should see, `error` for a failure with its cause in full (never shown to clients).
 */
export interface Logger {
  info(message: string): void;
  warn(message: string): void;
  error(message: string, cause?: unknown): void;
}

/** Lines on stderr, each prefixed with `runplane:`. */
export const consoleLogger: Logger = {
  info: (message) => console.error(`runplane: ${message}`),
  warn: (message) => console.error(`runplane: ${message}`),
  error: (message, cause) => (cause === undefined ? console.error(`runplane: ${message}`) : console.error(`runplane: ${message}`, cause)),
};

/** Says nothing (tests that provoke failures on purpose). */
export const silentLogger: Logger = { info: () => {}, warn: () => {}, error: () => {} };
