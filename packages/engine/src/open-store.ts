/** Opening the engine's LevelDB (on disk with a data folder, else in memory) through dynalite. */
import { mkdirSync } from 'node:fs';
import { createStore } from './dynalite.ts';
import { countOpenIterators } from './level-iterators.ts';
import { cacheTables } from './table-cache.ts';

/**
 * LevelDB tables kept open at once (LevelDB's default is 1,000). An open table is memory-
 * mapped and holds its index and bloom filter, so memory grows with the data as long as
 * tables are opened: measured over a million 1 KB writes (2.2 GB of data), 1,000 open tables
 * ended at 3.6x the RSS after 10,000 writes, 128 at 1.1x. Past this bound a lookup in a
 * table not open opens it again, which costs CPU on large data (see the endurance figures).
 */
const LEVELDB_MAX_OPEN_FILES = 128;

export async function openStore(dataDir: string | undefined, createTableMs: number) {
  if (dataDir) mkdirSync(dataDir, { recursive: true });
  const store = createStore({ path: dataDir, createTableMs });
  const openIterators = countOpenIterators(store.db as unknown as Parameters<typeof countOpenIterators>[0]);
  try {
    await store.db.open({ maxOpenFiles: LEVELDB_MAX_OPEN_FILES });
  } catch (err) {
    const cause = (err as { cause?: { code?: string } }).cause;
    if (cause?.code === 'LEVEL_LOCKED') {
      throw new Error(`engine: the data folder ${dataDir} is in use by another process`, { cause: err });
    }
    throw err;
  }
  cacheTables(store);
  return Object.assign(store, { openIterators });
}
