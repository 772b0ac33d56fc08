import { QueryCommand, type QueryCommandInput, type QueryCommandOutput } from '@aws-sdk/lib-dynamodb';

type Doc = { send: (command: QueryCommand) => Promise<QueryCommandOutput> };

/**
 * The pages of a Query, each request starting where the last one stopped, until the Query
 * ends or the caller stops asking (a page holds at most `Limit` items and 1 MB).
 */
export async function* queryPages(doc: Doc, input: Omit<QueryCommandInput, 'ExclusiveStartKey'>) {
  let start: Record<string, unknown> | undefined;
  do {
    const page = await doc.send(new QueryCommand({ ...input, ExclusiveStartKey: start }));
    yield page;
    start = page.LastEvaluatedKey;
  } while (start);
}
