/**
 * What an operation may cost, computed with its variables applied (a limit on literals alone
 * is bypassed by `first: $n`, or by a variable's default). Each field costs 1; a field whose
 * size depends on stored data costs its largest size (a payload: 1 per KB of the payload
 * limit); a field whose resolver reads the table costs 1 more per request it makes at most for
 * one parent (schema/table-reads.ts); a connection's selection costs its page size times,
 * `first`/`last` or the default. The result is an upper bound of the work, the response and
 * the table requests, known before anything runs.
 */
import {
  type DocumentNode,
  type FieldNode,
  type FragmentDefinitionNode,
  GraphQLError,
  type GraphQLField,
  type GraphQLNamedType,
  type GraphQLSchema,
  getArgumentValues,
  getNamedType,
  getOperationAST,
  getVariableValues,
  isCompositeType,
  isInterfaceType,
  isObjectType,
  Kind,
  type SelectionSetNode,
} from 'graphql';
import { codes } from '../schema/error-codes.ts';

export interface CostRules {
  maxCost: number;
  maxPageSize: number;
  defaultPageSize: number;
  /** Cost of particular fields, by `Type.field`; every other field costs 1. */
  weights: Readonly<Record<string, number>>;
  /** The table requests a field's resolver makes at most for one parent, charged on top of its cost. */
  readsOf?: (field: GraphQLField<unknown, unknown>) => number;
}

interface Walk {
  schema: GraphQLSchema;
  fragments: Map<string, FragmentDefinitionNode>;
  variables: Record<string, unknown>;
  rules: CostRules;
  /** Each fragment's cost, once: spreads of spreads would otherwise be walked exponentially often. */
  fragmentCosts: Map<string, number>;
  /** Whether a page size was read from the arguments (only then can the variables change the cost). */
  paged: boolean;
}

/**
 * The costs of operations no variable can change (no page size asked for), by the rules, the
 * document (one per query text from the document cache, and dropped with it) and the operation's
 * name: a subscription's setup and a mutation pay neither the coercion of their variables nor
 * the walk again.
 */
const fixedCosts = new WeakMap<CostRules, WeakMap<DocumentNode, Map<string, number>>>();

const pageArgs = ['first', 'last'] as const;

function fieldCost(walk: Walk, field: FieldNode, parent: GraphQLNamedType): number {
  const name = field.name.value;
  // Introspection is allowed or refused as a whole elsewhere; __typename is free.
  if (name.startsWith('__')) return 0;
  if (!isObjectType(parent) && !isInterfaceType(parent)) return 1;
  const definition = parent.getFields()[name];
  if (!definition) return 1;
  const own = (walk.rules.weights[`${parent.name}.${name}`] ?? 1) + (walk.rules.readsOf?.(definition) ?? 0);
  const type = getNamedType(definition.type);
  if (!field.selectionSet || !isCompositeType(type)) return own;
  let times = 1;
  if (definition.args.some((arg) => arg.name === 'first' || arg.name === 'last')) {
    walk.paged = true;
    const args = getArgumentValues(definition, field, walk.variables);
    const pages = pageArgs.map((arg) => args[arg]).filter((value): value is number => typeof value === 'number');
    for (const [arg, value] of pageArgs.map((arg) => [arg, args[arg]] as const)) {
      if (typeof value === 'number' && (value < 0 || value > walk.rules.maxPageSize)) {
        throw new GraphQLError(`Invalid input: ${name}.${arg}: must be from 0 to ${walk.rules.maxPageSize} (RUNPLANE_MAX_PAGE_SIZE)`, {
          nodes: field,
          extensions: { code: codes.badInput },
        });
      }
    }
    times = pages.length > 0 ? Math.max(...pages) : walk.rules.defaultPageSize;
  }
  return own + times * selectionCost(walk, field.selectionSet, type);
}

function selectionCost(walk: Walk, selections: SelectionSetNode, parent: GraphQLNamedType): number {
  let total = 0;
  for (const selection of selections.selections) {
    if (selection.kind === Kind.FIELD) {
      total += fieldCost(walk, selection, parent);
    } else if (selection.kind === Kind.INLINE_FRAGMENT) {
      const type = selection.typeCondition ? walk.schema.getType(selection.typeCondition.name.value) : parent;
      // Branches of a union are summed: an upper bound, as if each applied.
      if (type) total += selectionCost(walk, selection.selectionSet, type);
    } else {
      const name = selection.name.value;
      let cost = walk.fragmentCosts.get(name);
      if (cost === undefined) {
        const fragment = walk.fragments.get(name);
        const type = fragment && walk.schema.getType(fragment.typeCondition.name.value);
        cost = fragment && type ? selectionCost(walk, fragment.selectionSet, type) : 0;
        walk.fragmentCosts.set(name, cost);
      }
      total += cost;
    }
  }
  return total;
}

/**
 * The cost of the operation a request runs; throws a GraphQLError when it is over the limit
 * (or asks for a page over the page limit). A document that failed validation, or variables
 * that do not coerce, are left to execution to refuse: they never run.
 */
export function checkCost(
  schema: GraphQLSchema,
  document: DocumentNode,
  operationName: string | null | undefined,
  rawVariables: Readonly<Record<string, unknown>> | null | undefined,
  rules: CostRules,
): number {
  const known = fixedCosts
    .get(rules)
    ?.get(document)
    ?.get(operationName ?? '');
  if (known !== undefined) return overLimit(known, rules);
  const operation = getOperationAST(document, operationName);
  if (!operation) return 0;
  const coerced = getVariableValues(schema, operation.variableDefinitions ?? [], rawVariables ?? {}, { maxErrors: 1 });
  if (coerced.errors) return 0;
  const root = schema.getRootType(operation.operation);
  if (!root) return 0;
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const definition of document.definitions) {
    if (definition.kind === Kind.FRAGMENT_DEFINITION) fragments.set(definition.name.value, definition);
  }
  const walk: Walk = { schema, fragments, variables: coerced.coerced, rules, fragmentCosts: new Map(), paged: false };
  const cost = selectionCost(walk, operation.selectionSet, root);
  if (!walk.paged) {
    let byDocument = fixedCosts.get(rules);
    if (!byDocument) {
      byDocument = new WeakMap();
      fixedCosts.set(rules, byDocument);
    }
    let byName = byDocument.get(document);
    if (!byName) {
      byName = new Map();
      byDocument.set(document, byName);
    }
    byName.set(operationName ?? '', cost);
  }
  return overLimit(cost, rules);
}

/** `cost`, or a GraphQLError when it is over the limit. */
function overLimit(cost: number, rules: CostRules): number {
  if (cost > rules.maxCost) {
    throw new GraphQLError(
      `The operation's cost is ${cost}, over the limit of ${rules.maxCost} (RUNPLANE_MAX_QUERY_COST): ask for smaller pages (first/last) or fewer fields`,
      { extensions: { code: codes.costLimit, cost, maxCost: rules.maxCost, http: { status: 400 } } },
    );
  }
  return cost;
}
