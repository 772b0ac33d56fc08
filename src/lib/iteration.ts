/** The end of an iteration, one frozen object for every iterator that ends (an idle subscriber holds none of its own). */
export const DONE: IteratorResult<never> = Object.freeze({ value: undefined, done: true as const });
