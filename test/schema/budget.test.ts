import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { beforeAll, describe, expect, test } from 'vitest';
import { keys } from '../../src/table/keys.ts';
import { uniqueName } from '../support/aws.ts';
import { newRun, OPEN_TENANT } from '../support/runs.ts';
import { startTestServer, type TestServer } from '../support/server.ts';

let api: TestServer;
beforeAll(async () => {
  api = await startTestServer();
});

const CHARGE = `mutation($input: ChargeBudgetInput!) {
  chargeBudget(input: $input) {
    __typename
    ... on Budget { runId cap spent remaining }
    ... on BudgetExceeded { message runId cap spent remaining requested }
    ... on RunNotFound { runId }
  }
}`;

const charge = async (runId: string, amount: number) => (await api.gql(CHARGE, { input: { runId, amount } })).data?.chargeBudget;
const ledger = async (runId: string) =>
  (await api.server.clients.doc.send(new GetCommand({ TableName: api.table, Key: keys.budget(OPEN_TENANT, runId), ConsistentRead: true })))
    .Item;

describe('chargeBudget', () => {
  test('charges and returns the new ledger', async () => {
    const runId = await newRun(api, { budgetCap: 100 });
    expect(await charge(runId, 40)).toEqual({ __typename: 'Budget', runId, cap: 100, spent: 40, remaining: 60 });
    expect(await charge(runId, 60)).toMatchObject({ spent: 100, remaining: 0 });
    expect(await charge(runId, 0)).toMatchObject({ __typename: 'Budget', spent: 100 });
  });

  test('a charge past the cap is BudgetExceeded and changes nothing', async () => {
    const runId = await newRun(api, { budgetCap: 100 });
    await charge(runId, 90);
    const refused = await charge(runId, 11);
    expect(refused).toEqual({
      __typename: 'BudgetExceeded',
      runId,
      cap: 100,
      spent: 90,
      remaining: 10,
      requested: 11,
      message: `charging 11 would exceed the budget of run ${runId}: 10 of 100 remaining`,
    });
    expect(await ledger(runId)).toMatchObject({ spent: 90, remaining: 10 });
  });

  test('a missing run is RunNotFound and no ledger appears', async () => {
    const runId = uniqueName('absent');
    expect(await charge(runId, 1)).toEqual({ __typename: 'RunNotFound', runId });
    expect(await ledger(runId)).toBeUndefined();
  });

  test('50 concurrent charges of 30 against a cap of 1000 accept exactly 33; the ledger reads 990', async () => {
    const runId = await newRun(api, { budgetCap: 1000 });
    const results = await Promise.all(Array.from({ length: 50 }, () => charge(runId, 30)));
    expect(results.filter((r) => r.__typename === 'Budget')).toHaveLength(33);
    expect(results.filter((r) => r.__typename === 'BudgetExceeded')).toHaveLength(17);
    expect(await ledger(runId)).toMatchObject({ cap: 1000, spent: 990, remaining: 10 });
  });

  test.each([
    [-1, 'input.amount'],
    [1.5, 'Int cannot represent'],
  ])('amount %s is refused (%s)', async (amount, message) => {
    const runId = await newRun(api, { budgetCap: 100 });
    const response = await api.gql(CHARGE, { input: { runId, amount } });
    expect(response.errors?.[0]?.message).toContain(message);
    expect(await ledger(runId)).toMatchObject({ spent: 0 });
  });
});
