/** Routes a request to its operation, with fault injection around it. */
import { isDynaliteOperation, runAction, type Store, validate } from './dynalite.ts';
import type { Faults } from './faults.ts';
import { DYNAMODB_SERVICE, STREAMS_SERVICE, unsupported } from './operations.ts';
import type { RequestContext } from './request-context.ts';
import { type StreamsOperation, streamsOperations } from './streams/api.ts';

export type Handler = (body: Record<string, unknown>, context: RequestContext) => Promise<unknown> | unknown;

export interface Routes {
  store: Store;
  faults: Faults;
  /** The DynamoDB operations the engine adds to or takes over from dynalite. */
  dynamodb: Record<string, Handler>;
  streams: (operation: StreamsOperation, body: Record<string, unknown>, context: RequestContext) => Promise<unknown> | unknown;
}

export function createDispatch({ store, faults, dynamodb, streams }: Routes) {
  /** Applies the fault rules, then the operation; an `after` fault is answered once it has run. */
  async function run(operation: string, body: Record<string, unknown>, context: RequestContext, work: Handler) {
    const { after, stall } = await faults.apply(operation, body);
    const result = await work(body, stall ? { ...context, stall } : context);
    if (after) throw after;
    return result;
  }

  function dispatch(service: string, operation: string, body: Record<string, unknown>, context: RequestContext) {
    if (service === DYNAMODB_SERVICE) {
      const handler = Object.hasOwn(dynamodb, operation) ? dynamodb[operation] : undefined;
      if (handler) return run(operation, body, context, handler);
      // Reads and table listing: dynalite as it is, always through its validation.
      if (isDynaliteOperation(operation)) {
        return run(operation, body, context, () => runAction(operation, store, validate(operation, body, store)));
      }
    }
    if (service === STREAMS_SERVICE && streamsOperations.includes(operation as StreamsOperation)) {
      return run(operation, body, context, (_, withFaults) => streams(operation as StreamsOperation, body, withFaults));
    }
    return Promise.reject(unsupported(service, operation));
  }

  /** Whether `dispatch` has an operation for the target (it refuses every other one). */
  function serves(service: string, operation: string) {
    if (service === DYNAMODB_SERVICE) return Object.hasOwn(dynamodb, operation) || isDynaliteOperation(operation);
    return service === STREAMS_SERVICE && streamsOperations.includes(operation as StreamsOperation);
  }

  return { dispatch, serves };
}
