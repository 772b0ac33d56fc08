/**
 * A subscription's selection is executed once per event: a catch-up of 10,000 events runs
 * the same operation 10,000 times. graphql-jit compiles an operation into a plain function
 * once per parsed document (yoga's parser cache hands out one per query text), which takes
 * the per-event execution from about a sixth of a catch-up's time to almost nothing. An
 * operation it cannot compile runs on graphql-js's execute, as every query and mutation does.
 */
import { type DocumentNode, type ExecutionArgs, type ExecutionResult, execute } from 'graphql';
import { compileQuery, isCompiledQuery } from 'graphql-jit';

export type Execute = (args: ExecutionArgs) => ExecutionResult | Promise<ExecutionResult>;

/** Compiled operations by document, then operation name; dropped with the document. */
const compiledByDocument = new WeakMap<DocumentNode, Map<string, Execute>>();

function compile({ schema, document, operationName }: ExecutionArgs): Execute {
  let compiled: ReturnType<typeof compileQuery<Record<string, unknown>, Record<string, unknown>>>;
  try {
    // Stacks are never sent to clients, and capturing one per field error is not free.
    compiled = compileQuery(schema, document, operationName ?? undefined, { disablingCapturingStackErrors: true });
  } catch {
    return execute;
  }
  if (!isCompiledQuery(compiled)) return execute;
  return ({ rootValue, contextValue, variableValues }) => compiled.query(rootValue, contextValue, variableValues);
}

/** The execute function for this operation: compiled once per document and operation. */
export function compiledExecution(args: ExecutionArgs): Execute {
  let byOperation = compiledByDocument.get(args.document);
  if (!byOperation) {
    byOperation = new Map();
    compiledByDocument.set(args.document, byOperation);
  }
  const name = args.operationName ?? '';
  let run = byOperation.get(name);
  if (!run) {
    run = compile(args);
    byOperation.set(name, run);
  }
  return run;
}
