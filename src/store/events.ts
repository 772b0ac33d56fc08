/** The event store lives in events/; this path stays while streams/event-feed.ts imports EventStore by it (store/index.ts exports it too). */
export type { EventStore } from './events/index.ts';
