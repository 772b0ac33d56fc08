/**
 * Type-level tests, checked by `npm run typecheck` (the suite runs this file too, to little
 * effect). Both directions: a document that matches schema.graphql is typed from it, and one
 * that selects a field the schema lacks fails to compile where it is used (each
 * `@ts-expect-error` below fails the typecheck if that error ever goes away).
 */
import { graphql, type ResultOf, type Runplane, type VariablesOf } from 'runplane/client';
import { expectTypeOf, test } from 'vitest';

const RunStatus = graphql(`query RunStatus($id: ID!) { run(id: $id) { status budget { remaining } } }`);
const NoSuchField = graphql(`query NoSuchField($id: ID!) { run(id: $id) { status nope } }`);
const NoSuchRootField = graphql(`query NoSuchRootField { runz { edges { cursor } } }`);
const NoSelection = graphql(`query NoSelection($id: ID!) { run(id: $id) { budget } }`);
const NotOnTheMember = graphql(
  `mutation NotOnTheMember($input: AppendEventInput!) { appendEvent(input: $input) { __typename ... on Event { seq lastSeq } } }`,
);

type Status = 'AWAITING_APPROVAL' | 'CANCELLED' | 'COMPLETED' | 'FAILED' | 'RUNNING' | 'STALLED' | 'WAITING_FOR_TOOL';

test('a document is typed from schema.graphql: its result and its variables', () => {
  expectTypeOf<ResultOf<typeof RunStatus>>().toEqualTypeOf<{ run: { status: Status; budget: { remaining: number } } | null }>();
  expectTypeOf<VariablesOf<typeof RunStatus>>().toEqualTypeOf<{ id: string }>();
});

/** Never called (see the test below): what matters is that it compiles, and how. */
async function checkedAtCompileTime(client: Runplane) {
  const read = await client.request(RunStatus, { id: 'run-1' });
  expectTypeOf(read.run).toEqualTypeOf<{ status: Status; budget: { remaining: number } } | null>();
  // @ts-expect-error `nope` is not a field of Run
  await client.request(NoSuchField, { id: 'run-1' });
  // @ts-expect-error `runz` is not a field of Query
  await client.request(NoSuchRootField, {});
  // @ts-expect-error `budget` is an object: it needs a selection
  await client.request(NoSelection, { id: 'run-1' });
  // @ts-expect-error `lastSeq` is SequenceConflict's, not Event's
  await client.request(NotOnTheMember, { input: { runId: 'run-1', type: 't' } });
  // @ts-expect-error variables are typed too: `id` is required
  await client.request(RunStatus, {});

  // A mutation's answer is its union: each member's fields only after narrowing on __typename.
  const appended = await client.appendEvent({ runId: 'run-1', type: 'step', payload: { any: ['json', 1, null] } });
  // @ts-expect-error `lastSeq` exists on SequenceConflict only
  void appended.lastSeq;
  if (appended.__typename === 'SequenceConflict') expectTypeOf(appended.lastSeq).toEqualTypeOf<number>();
  if (appended.__typename === 'Event') expectTypeOf(appended.seq).toEqualTypeOf<number>();
  expectTypeOf(appended.__typename).toEqualTypeOf<
    'Event' | 'SequenceConflict' | 'RunNotFound' | 'BudgetExceeded' | 'ClaimLost' | 'IdempotencyConflict'
  >();
  // @ts-expect-error inputs are typed: `budgetCap` is required
  await client.createRun({ task: 't' });
}

test('the checks above are compiled, not run', () => {
  expectTypeOf(checkedAtCompileTime).parameter(0).toEqualTypeOf<Runplane>();
});
