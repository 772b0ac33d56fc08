/**
 * One execution per event, however many subscribers: subscribers of one run are handed the
 * same event object by the hub, and with the same document, variables and principal its
 * result is the same, so it is computed once and handed to each of them. Without this, a
 * thousand subscribers cost a thousand executions of every event.
 */

import { createSourceEventStream, type DocumentNode, type ExecutionArgs, type ExecutionResult, execute, type GraphQLError } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import { attached } from '../../lib/attached.ts';
import { DONE } from '../../lib/iteration.ts';
import type { Context } from '../../schema/context.ts';
import type { Source } from '../../streams/lazy.ts';
import { type Mask, withoutHttpStatus } from '../errors.ts';
import { planResults } from './plain-execution.ts';

type Result = ExecutionResult | Promise<ExecutionResult>;

/** An id per parsed document (yoga's parser cache hands out one document per query text). */
const documentIds = new WeakMap<DocumentNode, number>();
let lastDocumentId = 0;
const documentId = (document: DocumentNode) => {
  let id = documentIds.get(document);
  if (id === undefined) {
    id = ++lastDocumentId;
    documentIds.set(document, id);
  }
  return id;
};

/** An event's results, by who asked how (the first asker's inline: usually the only one); dropped with the event. */
interface EventResults {
  key: string;
  result: Result;
  others: Map<string, Result> | undefined;
}
const results = attached<object, EventResults>('results');

/** What a result keeps: the event it was made from (SSE names its frames after it), and its JSON once made. */
interface Kept {
  source: unknown;
  json: string | undefined;
}
const kept = attached<ExecutionResult, Kept>('kept');

/** The source event a subscription result was made from. */
export const sourceOf = (result: ExecutionResult) => kept.get(result)?.source;

const remember = (result: Result, payload: unknown): Result => {
  if (result instanceof Promise) return result.then((done) => remember(done, payload) as ExecutionResult);
  kept.set(result, { source: payload, json: undefined });
  return result;
};

/**
 * Executes the operation for a payload, once per payload for everyone asking alike (same
 * document, variables, principal). With `plain`, a selection that only reads the event is
 * resolved by its plan (plain-execution.ts), made at the first event; the others, and any
 * event the plan gives up on, by graphql-js.
 */
export function sharedExecution(args: ExecutionArgs, { plain = false } = {}): (payload: unknown) => Result {
  const context = args.contextValue as Partial<Context>;
  const key = `${documentId(args.document)}\u0000${args.operationName ?? ''}\u0000${context.tenant}\u0000${context.role}\u0000${JSON.stringify(args.variableValues ?? {})}`;
  let planned: ((payload: unknown) => ExecutionResult | undefined) | null | undefined = plain ? undefined : null;
  return (payload) => {
    if (typeof payload !== 'object' || payload === null) return execute({ ...args, rootValue: payload });
    const shared = results.get(payload);
    let result = shared?.key === key ? shared.result : shared?.others?.get(key);
    if (!result) {
      if (planned === undefined) planned = planResults(args) ?? null;
      result = remember(
        planned?.(payload) ??
          // Each event's result is a response of its own: it gets a whole response size limit and read budget.
          execute({
            ...args,
            rootValue: payload,
            contextValue: { ...context, response: context.response?.fork(), reads: context.reads?.fork() },
          }),
        payload,
      );
      if (!shared) results.set(payload, { key, result, others: undefined });
      else {
        shared.others ??= new Map();
        shared.others.set(key, result);
      }
    }
    return result;
  };
}

/**
 * The feed's events as results: one promise step per event (each subscriber pays every step
 * of every event it gets), return() straight to the feed, so an idle feed closes at once. A
 * class: every idle subscriber holds one.
 */
export class Results implements AsyncIterableIterator<ExecutionResult> {
  private readonly step: (item: IteratorResult<unknown>) => IteratorResult<ExecutionResult> | Promise<IteratorResult<ExecutionResult>>;

  constructor(
    private readonly source: AsyncIterator<unknown> & Pick<Source<unknown>, 'deliverTo'>,
    private readonly execute: (payload: unknown) => Result,
  ) {
    this.step = (item) => {
      if (item.done) return DONE;
      let result: Result;
      try {
        result = execute(item.value);
      } catch (err) {
        // As an iterator that fails: the feed is closed, then the error goes on.
        return Promise.resolve(this.source.return?.()).then(() => Promise.reject(err));
      }
      return result instanceof Promise ? result.then((value) => ({ value, done: false })) : { value: result, done: false };
    };
  }

  next() {
    return this.source.next().then(this.step);
  }

  /**
   * Results written by `write` as their events arrive while next() waits, without a promise per
   * event (the live stage of a socket: see socket-frames.ts). An event whose result is not ready
   * at once (a resolver that awaits), or that `write` declines, goes to the waiting next() as
   * usual. A source that cannot (no feed's channel underneath) ignores it: every result then
   * goes through next().
   */
  deliverTo(write: (result: ExecutionResult) => boolean) {
    this.source.deliverTo?.((payload) => {
      let result: Result;
      try {
        result = this.execute(payload);
      } catch {
        return false;
      }
      return !(result instanceof Promise) && write(result);
    });
  }

  async return() {
    await this.source.return?.();
    return DONE;
  }

  async throw(err: unknown): Promise<IteratorResult<ExecutionResult>> {
    await this.source.return?.();
    throw err;
  }

  [Symbol.asyncIterator]() {
    return this;
  }
}

/** A subscription's own results, by its context (one per operation), before envelop's hooks wrap them. */
const resultsByContext = new WeakMap<object, Results>();

/**
 * The results of the subscription whose context is `contextValue`, as made here: what envelop's
 * per-result hooks wrap (yoga's masking among them, which resultJson does alike).
 */
export const ownResults = (contextValue: unknown) =>
  typeof contextValue === 'object' && contextValue !== null ? resultsByContext.get(contextValue) : undefined;

async function subscribeShared(args: ExecutionArgs, plain: boolean) {
  const stream = await createSourceEventStream(args);
  if (!(Symbol.asyncIterator in stream)) return stream as ExecutionResult;
  const results = new Results(stream[Symbol.asyncIterator](), sharedExecution(args, { plain }));
  if (typeof args.contextValue === 'object' && args.contextValue !== null) resultsByContext.set(args.contextValue, results);
  return results;
}

/**
 * Sets the subscribe function. `plain`: events may be resolved by plans (plain-execution.ts);
 * only when the server's resolvers are its own (a user's plugin may wrap them).
 */
export const sharedDelivery = ({ plain }: { plain: boolean }): Plugin<Context> => ({
  onSubscribe({ setSubscribeFn }) {
    setSubscribeFn(((args: ExecutionArgs) => subscribeShared(args, plain)) as never);
  },
});

/** An error as clients see it: masked, without the HTTP status yoga keeps in its extensions. */
const clientError = (error: GraphQLError, mask: Mask) => withoutHttpStatus(mask(error, 'Unexpected error.') as GraphQLError).toJSON();

/** The JSON of a result, computed once however many subscribers it goes to. */
export function resultJson(result: ExecutionResult, mask: Mask) {
  // Kept with the result: subscribers sharing a result share its serialization.
  const keeping = kept.get(result);
  if (keeping?.json !== undefined) return keeping.json;
  const json = JSON.stringify(result.errors ? { ...result, errors: result.errors.map((error) => clientError(error, mask)) } : result);
  if (keeping) keeping.json = json;
  else kept.set(result, { source: undefined, json });
  return json;
}
