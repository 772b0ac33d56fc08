import { attr, type Item } from '../table/attributes.ts';

/** A row past its TTL counts as gone, though DynamoDB deletes it late (hours to days). */
export const pastTtl = (item: Item, nowMs: number) => Number(item[attr.ttl] ?? Number.POSITIVE_INFINITY) * 1000 <= nowMs;
