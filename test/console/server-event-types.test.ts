/** The console marks the rows of the server's own event types: its list is the server's. */
import { expect, test } from 'vitest';
import { SERVER_EVENT_TYPES } from '../../src/console/format.ts';
import { serverEventTypes } from '../../src/domain/run.ts';

test("the console's server event types are the server's", () => {
  expect([...SERVER_EVENT_TYPES].sort()).toEqual([...serverEventTypes].sort());
});
