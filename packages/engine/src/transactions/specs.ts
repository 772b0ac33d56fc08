/** The shape of TransactWriteItems and TransactGetItems requests, in dynalite's validation format. */
import { requestTypes } from '../dynalite.ts';
import { returnValuesOnFailureSpec } from '../items.ts';

export type WriteKind = 'ConditionCheck' | 'Put' | 'Delete' | 'Update';

/** Each action is validated as the single-item operation it resembles (its expressions parsed alike). */
export const operationOf = { Put: 'PutItem', Update: 'UpdateItem', Delete: 'DeleteItem', ConditionCheck: 'DeleteItem' } as const;

function pick(types: Record<string, unknown>, names: string[]) {
  return Object.fromEntries(names.map((name) => [name, types[name]]));
}

const expressionMembers = ['TableName', 'ConditionExpression', 'ExpressionAttributeNames', 'ExpressionAttributeValues'];
const member = (type: string, children: Record<string, unknown>, required: string[] = []) => ({
  type: `FieldStruct<${type}>`,
  children: {
    ...children,
    ...Object.fromEntries(required.map((name) => [name, { ...(children[name] as object), notNull: true }])),
    ReturnValuesOnConditionCheckFailure: returnValuesOnFailureSpec,
  },
});

/** `TransactItems`: 1 to 100 of one struct. */
const transactItems = (struct: string, children: Record<string, unknown>) => ({
  type: 'List',
  notNull: true,
  lengthGreaterThanOrEqual: 1,
  lengthLessThanOrEqual: 100,
  children: { type: `ValueStruct<${struct}>`, children },
});

export const writeSpec = {
  types: {
    TransactItems: transactItems('TransactWriteItem', {
      ConditionCheck: member('ConditionCheck', pick(requestTypes('DeleteItem'), ['Key', ...expressionMembers]), ['ConditionExpression']),
      Put: member('Put', pick(requestTypes('PutItem'), ['Item', ...expressionMembers])),
      Delete: member('Delete', pick(requestTypes('DeleteItem'), ['Key', ...expressionMembers])),
      Update: member('Update', pick(requestTypes('UpdateItem'), ['Key', 'UpdateExpression', ...expressionMembers]), ['UpdateExpression']),
    }),
    ClientRequestToken: { type: 'String', lengthGreaterThanOrEqual: 1, lengthLessThanOrEqual: 36 },
    ReturnConsumedCapacity: { type: 'String', enum: ['INDEXES', 'TOTAL', 'NONE'] },
    ReturnItemCollectionMetrics: { type: 'String', enum: ['SIZE', 'NONE'] },
  },
};

export const getSpec = {
  types: {
    TransactItems: transactItems('TransactGetItem', {
      Get: {
        type: 'FieldStruct<Get>',
        notNull: true,
        children: pick(requestTypes('GetItem'), ['Key', 'TableName', 'ProjectionExpression', 'ExpressionAttributeNames']),
      },
    }),
    ReturnConsumedCapacity: { type: 'String', enum: ['INDEXES', 'TOTAL', 'NONE'] },
  },
};
