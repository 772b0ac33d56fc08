/**
 * How many first events a run(id) read should fetch with the run: as many as the query's
 * `events(first: N)` asks for (with no cursor or filter), so that metadata, budget and that
 * page come from ONE Query; none when the query does not select events.
 */
import { type FieldNode, type GraphQLResolveInfo, Kind, type SelectionSetNode, type ValueNode } from 'graphql';
import { DEFAULT_PAGE_SIZE } from '../domain/limits.ts';

function value(node: ValueNode, variables: Record<string, unknown>): unknown {
  if (node.kind === Kind.VARIABLE) return variables[node.name.value];
  if (node.kind === Kind.INT) return Number(node.value);
  if (node.kind === Kind.NULL) return null;
  return node.kind;
}

function eventsFields(selections: SelectionSetNode | undefined, info: GraphQLResolveInfo, into: FieldNode[] = []) {
  for (const selection of selections?.selections ?? []) {
    if (selection.kind === Kind.FIELD && selection.name.value === 'events') into.push(selection);
    else if (selection.kind === Kind.INLINE_FRAGMENT) eventsFields(selection.selectionSet, info, into);
    else if (selection.kind === Kind.FRAGMENT_SPREAD) eventsFields(info.fragments[selection.name.value]?.selectionSet, info, into);
  }
  return into;
}

export function firstEventsWanted(info: GraphQLResolveInfo, maxPageSize: number) {
  let wanted = 0;
  for (const field of eventsFields(info.fieldNodes[0]?.selectionSet, info)) {
    const args = Object.fromEntries((field.arguments ?? []).map((a) => [a.name.value, value(a.value, info.variableValues)]));
    // A page that starts elsewhere, or is filtered, is read on its own: nothing to fetch with the run.
    const plain = ['after', 'before', 'last', 'afterSeq', 'types'].every((name) => args[name] === undefined || args[name] === null);
    const first = args.first === undefined || args.first === null ? DEFAULT_PAGE_SIZE : args.first;
    if (plain && typeof first === 'number' && Number.isInteger(first)) wanted = Math.max(wanted, Math.min(Math.max(first, 0), maxPageSize));
  }
  return wanted;
}

/** The fields named `name` in a selection, through fragments. */
function fieldsNamed(selections: SelectionSetNode | undefined, name: string, info: GraphQLResolveInfo, into: FieldNode[] = []) {
  for (const selection of selections?.selections ?? []) {
    if (selection.kind === Kind.FIELD && selection.name.value === name) into.push(selection);
    else if (selection.kind === Kind.INLINE_FRAGMENT) fieldsNamed(selection.selectionSet, name, info, into);
    else if (selection.kind === Kind.FRAGMENT_SPREAD) fieldsNamed(info.fragments[selection.name.value]?.selectionSet, name, info, into);
  }
  return into;
}

/**
 * Whether a listing's runs (`edges { node { ... } }`) are asked for their budget or claim: then
 * the listing reads those rows for the whole page at once (BatchGetItem), and the fields resolve
 * without a promise each.
 */
export function runHeadsWanted(info: GraphQLResolveInfo) {
  for (const edges of fieldsNamed(info.fieldNodes[0]?.selectionSet, 'edges', info))
    for (const node of fieldsNamed(edges.selectionSet, 'node', info))
      if (fieldsNamed(node.selectionSet, 'budget', info).length > 0 || fieldsNamed(node.selectionSet, 'claim', info).length > 0)
        return true;
  return false;
}
