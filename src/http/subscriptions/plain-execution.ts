/**
 * A subscription event's result without graphql-js's execute, for a selection that only reads
 * the event: every field selected is read from its parent as graphql-js's default resolver
 * does, or resolved by a resolver marked `plainRead` (synchronous, reading only its parent).
 * graphql-js spends most of an event's execution on what is the same for every event of a
 * subscription (coercing its variables and arguments, collecting fields, building an info
 * per field); here that is done once, from the validated document, and each event costs a
 * walk over a plan of data (no code is generated).
 *
 * It only makes results graphql-js would make without errors. Anything else (a null for a
 * non-null field, a value a scalar refuses, a promise, an error, a function where a value was
 * read) gives up, and the caller executes that event with graphql-js, which says what went
 * wrong as it always has. A selection it cannot plan (abstract types, fields with arguments
 * or resolvers of their own) is always executed by graphql-js.
 */
import {
  type ExecutionArgs,
  type ExecutionResult,
  type FieldNode,
  type FragmentDefinitionNode,
  type GraphQLFieldResolver,
  GraphQLIncludeDirective,
  type GraphQLObjectType,
  type GraphQLOutputType,
  type GraphQLSchema,
  GraphQLSkipDirective,
  getDirectiveValues,
  getOperationAST,
  getVariableValues,
  isAbstractType,
  isLeafType,
  isListType,
  isNonNullType,
  isObjectType,
  Kind,
  type NamedTypeNode,
  type SelectionSetNode,
  typeFromAST,
} from 'graphql';
import { isPlainRead } from '../../schema/plain-read.ts';

/** What a plan step returns when graphql-js would do something other than put a value there. */
const GIVE_UP: unique symbol = Symbol('give up');
type Complete = (value: unknown) => unknown;

interface Planning {
  schema: GraphQLSchema;
  fragments: Record<string, FragmentDefinitionNode>;
  variables: Record<string, unknown>;
}

const NO_ARGS = Object.freeze({});

/**
 * The plan of a subscription's per-event results, or undefined when it has none (graphql-js
 * executes every event). The plan returns undefined for an event it gives up on.
 */
export function planResults(args: ExecutionArgs): ((payload: unknown) => ExecutionResult | undefined) | undefined {
  try {
    return plan(args);
  } catch {
    // Say, a directive's argument graphql-js refuses at each event (an explicit null): it says so, each time.
    return undefined;
  }
}

function plan(args: ExecutionArgs): ((payload: unknown) => ExecutionResult | undefined) | undefined {
  const { schema, document } = args;
  const operation = getOperationAST(document, args.operationName);
  const type = schema.getSubscriptionType();
  if (operation?.operation !== 'subscription' || !type) return undefined;
  const coerced = getVariableValues(schema, operation.variableDefinitions ?? [], args.variableValues ?? {}, { maxErrors: 1 });
  if (coerced.errors) return undefined;
  const fragments: Record<string, FragmentDefinitionNode> = Object.create(null);
  for (const definition of document.definitions)
    if (definition.kind === Kind.FRAGMENT_DEFINITION) fragments[definition.name.value] = definition;
  const planning: Planning = { schema, fragments, variables: coerced.coerced };
  // The root field is planned apart: unlike the fields below it, it has arguments (settled at
  // subscribe time; its marked resolver ignores them).
  const roots = collect(planning, type, [operation.selectionSet]);
  const root = roots?.size === 1 ? [...roots][0] : undefined;
  if (!root) return undefined;
  const [key, nodes] = root;
  const field = type.getFields()[nodes[0]?.name.value ?? ''];
  if (!field || !isPlainRead(field.extensions)) return undefined;
  const resolve = field.resolve as GraphQLFieldResolver<unknown, unknown> | undefined;
  const complete = completer(planning, field.type, nodes);
  if (!complete) return undefined;
  return (payload) => {
    try {
      const value = complete(resolve ? resolve(payload, NO_ARGS, undefined, undefined as never) : readField(payload, field.name));
      if (value === GIVE_UP) return undefined;
      const data = Object.create(null);
      data[key] = value;
      return { data };
    } catch {
      return undefined;
    }
  };
}

/** What graphql-js's default resolver reads; a method (which it would call) gives up. */
function readField(source: unknown, name: string) {
  if (typeof source !== 'object' || source === null) return GIVE_UP;
  const value = (source as Record<string, unknown>)[name];
  return typeof value === 'function' ? GIVE_UP : value;
}

const isThenable = (value: unknown) =>
  typeof value === 'object' && value !== null && typeof (value as { then?: unknown }).then === 'function';

/** completeValue of graphql-js for `type`, or undefined when it cannot be planned. */
function completer(planning: Planning, type: GraphQLOutputType, nodes: readonly FieldNode[]): Complete | undefined {
  const required = isNonNullType(type);
  const inner = nullableCompleter(planning, required ? type.ofType : type, nodes);
  if (!inner) return undefined;
  return (value) => {
    if (value === GIVE_UP || value instanceof Error || isThenable(value)) return GIVE_UP;
    if (value === null || value === undefined) return required ? GIVE_UP : null;
    return inner(value);
  };
}

function nullableCompleter(planning: Planning, type: GraphQLOutputType, nodes: readonly FieldNode[]): Complete | undefined {
  if (isLeafType(type))
    return (value) => {
      const serialized = type.serialize(value);
      // graphql-js reports a serialized null (or undefined) as the field's error.
      return serialized === undefined || serialized === null ? GIVE_UP : serialized;
    };
  if (isListType(type)) {
    const item = completer(planning, type.ofType, nodes);
    if (!item) return undefined;
    return (value) => {
      // Other iterables are graphql-js's to walk.
      if (!Array.isArray(value)) return GIVE_UP;
      const out = new Array(value.length);
      for (let i = 0; i < value.length; i++) {
        const done = item(value[i]);
        if (done === GIVE_UP) return GIVE_UP;
        out[i] = done;
      }
      return out;
    };
  }
  if (isObjectType(type)) return objectCompleter(planning, type, nodes);
  // Interfaces and unions: graphql-js resolves the type.
  return undefined;
}

function objectCompleter(planning: Planning, type: GraphQLObjectType, nodes: readonly FieldNode[]): Complete | undefined {
  if (type.isTypeOf) return undefined;
  const fields = collect(
    planning,
    type,
    nodes.flatMap((node) => (node.selectionSet ? [node.selectionSet] : [])),
  );
  if (!fields) return undefined;
  const steps: Array<{ key: string; read: Complete }> = [];
  for (const [key, fieldNodes] of fields) {
    const name = fieldNodes[0]?.name.value ?? '';
    if (name === '__typename') {
      steps.push({ key, read: () => type.name });
      continue;
    }
    const field = type.getFields()[name];
    if (!field || field.args.length > 0 || (field.resolve && !isPlainRead(field.extensions))) return undefined;
    const complete = completer(planning, field.type, fieldNodes);
    if (!complete) return undefined;
    const resolve = field.resolve as GraphQLFieldResolver<unknown, unknown> | undefined;
    steps.push({
      key,
      read: resolve
        ? (source) => complete(resolve(source, NO_ARGS, undefined, undefined as never))
        : (source) => complete(readField(source, name)),
    });
  }
  return (source) => {
    if (typeof source !== 'object') return GIVE_UP;
    const out = Object.create(null);
    for (const step of steps) {
      const value = step.read(source);
      if (value === GIVE_UP) return GIVE_UP;
      out[step.key] = value;
    }
    return out;
  };
}

/** graphql-js's collectFields: the fields of `selectionSets` on `type`, by response key, in order; undefined if it cannot tell. */
function collect(planning: Planning, type: GraphQLObjectType, selectionSets: readonly SelectionSetNode[]) {
  const fields = new Map<string, FieldNode[]>();
  const visited = new Set<string>();
  const walk = (selectionSet: SelectionSetNode): boolean => {
    for (const selection of selectionSet.selections) {
      if (!included(planning, selection)) continue;
      if (selection.kind === Kind.FIELD) {
        const key = selection.alias?.value ?? selection.name.value;
        const known = fields.get(key);
        if (known) known.push(selection);
        else fields.set(key, [selection]);
      } else if (selection.kind === Kind.INLINE_FRAGMENT) {
        if (selection.typeCondition && !applies(planning, selection.typeCondition, type)) continue;
        if (!walk(selection.selectionSet)) return false;
      } else {
        const name = selection.name.value;
        if (visited.has(name)) continue;
        visited.add(name);
        const fragment = planning.fragments[name];
        if (!fragment) return false;
        if (!applies(planning, fragment.typeCondition, type)) continue;
        if (!walk(fragment.selectionSet)) return false;
      }
    }
    return true;
  };
  for (const selectionSet of selectionSets) if (!walk(selectionSet)) return undefined;
  return fields;
}

/** @skip and @include, as graphql-js reads them (with the subscription's variables). */
function included(planning: Planning, node: Parameters<typeof getDirectiveValues>[1]) {
  const skip = getDirectiveValues(GraphQLSkipDirective, node, planning.variables);
  if (skip?.if === true) return false;
  const include = getDirectiveValues(GraphQLIncludeDirective, node, planning.variables);
  return include?.if !== false;
}

/** graphql-js's doesFragmentConditionMatch. */
function applies(planning: Planning, condition: NamedTypeNode, type: GraphQLObjectType) {
  const conditional = typeFromAST(planning.schema, condition);
  if (conditional === type) return true;
  return isAbstractType(conditional) ? planning.schema.isSubType(conditional, type) : false;
}
