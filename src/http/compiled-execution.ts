/**
 * Operations in use run as functions compiled by graphql-jit, once per parsed document (yoga's
 * parser cache hands out one per query text, and keeps 1,024 of them; a compiled operation goes
 * with its document). A subscription's selection runs once per event (a catch-up of 10,000
 * events runs it 10,000 times), an agent's mutation thousands of times: both are compiled after
 * their first few executions. An operation jit cannot compile runs on graphql-js's execute.
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

/** An operation compiled by graphql-jit (graphql-js's execute if jit cannot compile it). */
export function compileOperation({ schema, document, operationName }: ExecutionArgs): Execute {
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

/**
 * Executions of an operation before it is compiled. Compiling a large document costs about ten
 * times its parsing and validation (24 ms against 2 ms for 15 aliased runs with their events):
 * only an operation in use is worth it, and a client sending new documents cannot make the
 * server compile more often than once per this many of its executions.
 */
const COMPILE_AFTER = 10;

interface Operation {
  uses: number;
  compiled?: Execute;
  /** The compiled operation behind graphql-js's check of its variables (queries and mutations). */
  checked?: Execute;
}

/** Operations by document, then operation name; dropped with the document. */
const operations = new WeakMap<DocumentNode, Map<string, Operation>>();

function operationOf({ document, operationName }: ExecutionArgs): Operation {
  let byName = operations.get(document);
  if (!byName) {
    byName = new Map();
    operations.set(document, byName);
  }
  const name = operationName ?? '';
  let operation = byName.get(name);
  if (!operation) {
    operation = { uses: 0 };
    byName.set(name, operation);
  }
  return operation;
}

/** This execution counted: the compiled operation once it has been executed COMPILE_AFTER times, else undefined. */
export function compiledWhenHot(args: ExecutionArgs): Execute | undefined {
  const operation = operationOf(args);
  if (!operation.compiled && ++operation.uses > COMPILE_AFTER) operation.compiled = compileOperation(args);
  return operation.compiled;
}

/** Executes an operation: on graphql-js until it is in use, compiled from then on. */
export const executeOperation: Execute = (args) => (compiledWhenHot(args) ?? execute)(args);

/**
 * Variables are checked by graphql-js before the compiled operation runs: its refusals name the
 * variable and the path inside it (`Variable "$input" got invalid value [] at
 * "input.idempotencyKey"`), where jit would name the inner field as if it were a variable.
 */
function checkedVariables(run: Execute, { document, operationName }: ExecutionArgs): Execute {
  const definitions = getOperationAST(document, operationName)?.variableDefinitions ?? [];
  return (args) => {
    const coerced = getVariableValues(args.schema, definitions, args.variableValues ?? {}, { maxErrors: 50 });
    if (coerced.errors) return { errors: coerced.errors as GraphQLError[] };
    return run(args);
  };
}

/** The envelop plugin running queries and mutations compiled once their operation is in use. */
export const compiledOperations = {
  onExecute({ args, setExecuteFn }: { args: ExecutionArgs; setExecuteFn: (execute: Execute) => void }) {
    const compiled = compiledWhenHot(args);
    if (!compiled) return;
    const operation = operationOf(args);
    operation.checked ??= checkedVariables(compiled, args);
    setExecuteFn(operation.checked);
  },
};
