/**
 * Operations run as functions compiled by graphql-jit, once per parsed document (yoga's parser
 * cache hands out one per query text, and keeps 1,024 of them; a compiled operation goes with
 * its document). A subscription's selection is executed once per event, so a catch-up of
 * 10,000 events runs it 10,000 times: compiled at once. A query or mutation is compiled from
 * its third execution on: a one-off document is not worth compiling. An operation jit cannot
 * compile runs on graphql-js's execute.
 */
import {
  type ASTNode,
  type DocumentNode,
  type ExecutionArgs,
  type ExecutionResult,
  execute,
  GraphQLError,
  getLocation,
  getOperationAST,
  getVariableValues,
  visit,
} from 'graphql';
import { compileQuery, isCompiledQuery } from 'graphql-jit';

export type Execute = (args: ExecutionArgs) => ExecutionResult | Promise<ExecutionResult>;

/** Compiled operations by document, then operation name; dropped with the document. */
const compiledByDocument = new WeakMap<DocumentNode, Map<string, Execute>>();

/** The document's fields by where they start (`line:column`). */
function fieldsByLocation(document: DocumentNode) {
  const fields = new Map<string, ASTNode>();
  visit(document, {
    Field(node) {
      if (node.loc) {
        const { line, column } = getLocation(node.loc.source, node.loc.start);
        fields.set(`${line}:${column}`, node);
      }
    },
  });
  return fields;
}

/**
 * jit's field errors carry locations but not the nodes they came from, and yoga rebuilds each
 * error from its nodes as it writes the response: without them the locations would be lost.
 * Rebuilt here as graphql-js builds them, from the field nodes.
 */
function locatedErrors(document: DocumentNode) {
  let fields: Map<string, ASTNode> | undefined;
  return (result: ExecutionResult): ExecutionResult => {
    if (!result.errors?.length) return result;
    fields ??= fieldsByLocation(document);
    const known = fields;
    const errors = result.errors.map((error) => {
      if (error.nodes || !error.locations) return error;
      const nodes = error.locations.map(({ line, column }) => known.get(`${line}:${column}`)).filter((node) => node !== undefined);
      return new GraphQLError(error.message, {
        nodes: nodes.length ? nodes : undefined,
        path: error.path,
        originalError: error.originalError,
        extensions: error.extensions,
      });
    });
    return { ...result, errors };
  };
}

function compile({ schema, document, operationName }: ExecutionArgs): Execute {
  let compiled: ReturnType<typeof compileQuery<Record<string, unknown>, Record<string, unknown>>>;
  try {
    // Stacks are never sent to clients, and capturing one per field error is not free.
    compiled = compileQuery(schema, document, operationName ?? undefined, { disablingCapturingStackErrors: true });
  } catch {
    return execute;
  }
  if (!isCompiledQuery(compiled)) return execute;
  const located = locatedErrors(document);
  return ({ rootValue, contextValue, variableValues }) => {
    const result = compiled.query(rootValue, contextValue, variableValues);
    return result instanceof Promise ? result.then(located) : located(result);
  };
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

/** Executions of a document before it is compiled. */
const COMPILE_AFTER = 2;
const uses = new WeakMap<DocumentNode, number>();

/**
 * Variables are checked by graphql-js before the compiled operation runs: its refusals name the
 * variable and the path inside it (`Variable "$input" got invalid value [] at
 * "input.idempotencyKey"`), where jit would name the inner field as if it were a variable.
 */
function checkedVariables(run: Execute): Execute {
  return (args) => {
    const operation = getOperationAST(args.document, args.operationName);
    const coerced = getVariableValues(args.schema, operation?.variableDefinitions ?? [], args.variableValues ?? {}, { maxErrors: 50 });
    if (coerced.errors) return { errors: coerced.errors as GraphQLError[] };
    return run(args);
  };
}

/** The envelop plugin running queries and mutations compiled, once their document is in use. */
export const compiledOperations = {
  onExecute({ args, setExecuteFn }: { args: ExecutionArgs; setExecuteFn: (execute: Execute) => void }) {
    const count = (uses.get(args.document) ?? 0) + 1;
    if (count <= COMPILE_AFTER) {
      uses.set(args.document, count);
      return;
    }
    setExecuteFn(checkedVariables(compiledExecution(args)));
  },
};
