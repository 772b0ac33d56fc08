/**
 * dynalite turns LevelDB iterators into streams and, when a stream ends or is destroyed,
 * closes its iterator by calling `iterator.return()`, which abstract-level's iterators do not
 * have: every Query and Scan left its iterator open, registered with the database for good and
 * holding a snapshot of it (memory-level keeps the whole tree of that moment alive). Giving
 * them `return` closes each one when its stream is done; `countOpenIterators` lets the engine
 * report how many are open, so a test can hold that at zero.
 */
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

interface Closable {
  close(): Promise<void>;
  return?: () => Promise<{ done: true; value: undefined }>;
}

const iterators: { prototype: Closable }[] = Object.values(
  require('abstract-level/abstract-iterator.js') as Record<string, { prototype: Closable }>,
).filter((exported) => typeof exported?.prototype?.close === 'function');
for (const { prototype } of iterators) {
  prototype.return ??= async function (this: Closable) {
    await this.close();
    return { done: true, value: undefined };
  };
}

interface Resources {
  attachResource(resource: unknown): void;
  detachResource(resource: unknown): void;
}

/** Counts what the database has open (iterators, snapshots) from now on. */
export function countOpenIterators(db: Resources): () => number {
  const open = new Set<unknown>();
  const attach = db.attachResource.bind(db);
  const detach = db.detachResource.bind(db);
  db.attachResource = (resource) => {
    open.add(resource);
    attach(resource);
  };
  db.detachResource = (resource) => {
    open.delete(resource);
    detach(resource);
  };
  return () => open.size;
}
