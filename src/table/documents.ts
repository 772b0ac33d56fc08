/**
 * The table's items as plain JSON: lib-dynamodb's commands (`new PutCommand({...})`, as the
 * stores write them), sent through a low-level DynamoDBClient that resolves the SDK's
 * middleware once per kind of command (its `cacheMiddleware` option) instead of once per call.
 *
 * lib-dynamodb's own client cannot: it refuses `cacheMiddleware` (each of its commands builds
 * its own stack around one input), and resolving a command's stack cost about a third of a
 * PutItem's time in this process (in-process engine: 480 us a put through the document
 * client, 345 us through this). The marshalling is the same: util-dynamodb's, with the
 * options lib-dynamodb is given, on the same members of each command. A command this does not
 * translate (a Scan, a legacy `Expected` or `KeyConditions`) goes through lib-dynamodb's
 * client as before; errors are the SDK's as they come (lib-dynamodb does not convert them either).
 */
import {
  BatchGetItemCommand,
  DeleteItemCommand,
  type DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  QueryCommand as QueryItemsCommand,
  TransactWriteItemsCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import {
  BatchGetCommand,
  DeleteCommand,
  DynamoDBDocumentClient,
  GetCommand,
  PutCommand,
  QueryCommand,
  TransactWriteCommand,
  UpdateCommand,
} from '@aws-sdk/lib-dynamodb';
import {
  type marshallOptions as MarshallOptions,
  marshall,
  type unmarshallOptions as UnmarshallOptions,
  unmarshall,
} from '@aws-sdk/util-dynamodb';

type Doc = Record<string, unknown>;
type Input = Record<string, unknown>;
type Output = Record<string, unknown>;

interface Translation {
  /** The input as the low-level command takes it, or undefined to leave the command to lib-dynamodb. */
  input(input: Input, to: (record: unknown) => unknown): Input | undefined;
  output(output: Output, from: (record: unknown) => unknown): Output;
  command: new (input: never) => unknown;
}

/** `record`'s members named in `names`, each converted (absent ones stay absent). */
function converting(record: Input, names: readonly string[], convert: (value: unknown) => unknown): Input {
  const copy: Input = { ...record };
  for (const name of names) if (copy[name] !== undefined) copy[name] = convert(copy[name]);
  return copy;
}

const same = (output: Output) => output;
const withAttributes = (output: Output, from: (record: unknown) => unknown) => converting(output, ['Attributes'], from);
/** A command whose legacy parameters lib-dynamodb converts too: left to it. */
const legacy = (input: Input, names: string[]) => names.some((name) => input[name] !== undefined);

const translations = new Map<unknown, Translation>([
  [
    GetCommand,
    {
      command: GetItemCommand,
      input: (input, to) => converting(input, ['Key'], to),
      output: (output, from) => converting(output, ['Item'], from),
    },
  ],
  [
    PutCommand,
    {
      command: PutItemCommand,
      input: (input, to) => (legacy(input, ['Expected']) ? undefined : converting(input, ['Item', 'ExpressionAttributeValues'], to)),
      output: withAttributes,
    },
  ],
  [
    UpdateCommand,
    {
      command: UpdateItemCommand,
      input: (input, to) =>
        legacy(input, ['Expected', 'AttributeUpdates']) ? undefined : converting(input, ['Key', 'ExpressionAttributeValues'], to),
      output: withAttributes,
    },
  ],
  [
    DeleteCommand,
    {
      command: DeleteItemCommand,
      input: (input, to) => (legacy(input, ['Expected']) ? undefined : converting(input, ['Key', 'ExpressionAttributeValues'], to)),
      output: withAttributes,
    },
  ],
  [
    QueryCommand,
    {
      command: QueryItemsCommand,
      input: (input, to) =>
        legacy(input, ['KeyConditions', 'QueryFilter'])
          ? undefined
          : converting(input, ['ExpressionAttributeValues', 'ExclusiveStartKey'], to),
      output: (output, from) => {
        const converted = converting(output, ['LastEvaluatedKey'], from);
        if (Array.isArray(output.Items)) converted.Items = output.Items.map(from);
        return converted;
      },
    },
  ],
  [
    BatchGetCommand,
    {
      command: BatchGetItemCommand,
      input: (input, to) => ({ ...input, RequestItems: keysOf(input.RequestItems as Record<string, Input>, to) }),
      output: (output, from) => {
        const converted: Output = { ...output };
        if (output.Responses)
          converted.Responses = Object.fromEntries(
            Object.entries(output.Responses as Record<string, unknown[]>).map(([table, items]) => [table, items.map(from)]),
          );
        if (output.UnprocessedKeys) converted.UnprocessedKeys = keysOf(output.UnprocessedKeys as Record<string, Input>, from);
        return converted;
      },
    },
  ],
  [
    TransactWriteCommand,
    {
      command: TransactWriteItemsCommand,
      input: (input, to) => ({
        ...input,
        TransactItems: (input.TransactItems as Record<string, Input>[]).map((member) => {
          const copy: Record<string, Input> = { ...member };
          if (copy.ConditionCheck) copy.ConditionCheck = converting(copy.ConditionCheck, ['Key', 'ExpressionAttributeValues'], to);
          if (copy.Put) copy.Put = converting(copy.Put, ['Item', 'ExpressionAttributeValues'], to);
          if (copy.Delete) copy.Delete = converting(copy.Delete, ['Key', 'ExpressionAttributeValues'], to);
          if (copy.Update) copy.Update = converting(copy.Update, ['Key', 'ExpressionAttributeValues'], to);
          return copy;
        }),
      }),
      output: same,
    },
  ],
]);

/** A BatchGet's `{ table: { Keys, ... } }` with each key converted. */
function keysOf(requests: Record<string, Input>, convert: (record: unknown) => unknown) {
  return Object.fromEntries(
    Object.entries(requests).map(([table, request]) => [table, { ...request, Keys: (request.Keys as unknown[]).map(convert) }]),
  );
}

export interface DocumentsOptions {
  marshallOptions: MarshallOptions;
  unmarshallOptions: UnmarshallOptions;
}

/** What the stores send their commands through: lib-dynamodb's `send`, commands in, plain JSON out. */
export interface Documents {
  send: DynamoDBDocumentClient['send'];
}

/**
 * Documents over `cached`, a client made with `cacheMiddleware: true` (and so used for nothing
 * that needs per-call options), and `plain`, lib-dynamodb's way, for what is not translated.
 */
export function createDocuments(cached: DynamoDBClient, plain: DynamoDBClient, options: DocumentsOptions): Documents {
  const documents = DynamoDBDocumentClient.from(plain, {
    // Copies: the document client writes its own settings into the objects it is given.
    marshallOptions: { ...options.marshallOptions },
    unmarshallOptions: { ...options.unmarshallOptions },
  });
  const to = (record: unknown) => marshall(record as Doc, options.marshallOptions);
  const from = (record: unknown) => unmarshall(record as never, options.unmarshallOptions);
  const send = async (command: { input: Input }, ...rest: unknown[]) => {
    const translation = rest.length === 0 ? translations.get(command.constructor) : undefined;
    const input = translation?.input(command.input, to);
    if (!translation || !input) return (documents.send as (...args: unknown[]) => Promise<unknown>)(command, ...rest);
    const output = (await cached.send(new translation.command(input as never) as never)) as unknown as Output;
    return translation.output(output, from);
  };
  return { send: send as Documents['send'] };
}
