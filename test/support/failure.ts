/** The engine package's test support, shared with the server's tests. */
export * from '../../packages/engine/test/support/failure.ts';
