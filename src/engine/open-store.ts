/** Opening the engine's LevelDB (on disk with a data folder, else in memory) through dynalite. */
import { mkdirSync } from 'node:fs';
import { createStore } from './dynalite.ts';

/**
 * LevelDB tables kept open at once (LevelDB's default is 1,000). Each open table holds its
 * index in memory, so the default lets memory grow with the data up to about 3 GB of it;
 * past this bound a read of an old table opens it again (slower, and rare: reads go mostly
 * to recent data).
 */
const LEVELDB_MAX_OPEN_FILES = 128;

export async function openStore(dataDir: string | undefined, createTableMs: number) {
  if (dataDir) mkdirSync(dataDir, { recursive: true });
  const store = createStore({ path: dataDir, createTableMs });
  try {
    await store.db.open({ maxOpenFiles: LEVELDB_MAX_OPEN_FILES });
  } catch (err) {
    const cause = (err as { cause?: { code?: string } }).cause;
    if (cause?.code === 'LEVEL_LOCKED') {
      throw new Error(`engine: the data folder ${dataDir} is in use by another process`, { cause: err });
    }
    throw err;
  }
  return store;
}
