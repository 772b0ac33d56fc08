/**
 * API keys: each maps to a tenant, may be read-only, and may carry a name (recorded as who
 * decided an approval or cancelled a run). Keys come from RUNPLANE_API_KEYS
 * (`key=tenant[:read|:write[:name]]`, comma-separated) and/or a file (one per line,
 * `#` comments), which is re-read when it changes, so removing a line revokes a key.
 * Keys are compared as SHA-256 digests in constant time.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { ID_PATTERN } from '../domain/limits.ts';
import { KEY_NAME_PATTERN, KEY_NAME_RULE, type Principal, type Role } from '../domain/principal.ts';
import { consoleLogger, type Logger } from '../lib/logger.ts';

export const OPEN_TENANT = 'default';
const MIN_KEY_LENGTH = 16;
const KEY_PATTERN = /^[A-Za-z0-9._~+/=-]+$/;

interface Entry {
  digest: Buffer;
  principal: Principal;
}

const digest = (key: string) => createHash('sha256').update(key).digest();

/** Parses `key=tenant[:read|:write[:name]]` entries; `where` names the source in errors. */
export function parseKeys(text: string, where: string): Entry[] {
  const entries: Entry[] = [];
  // '#' starts a comment at the start of a line or after a space (a tenant with '#' is refused, not cut).
  const lines = text.split(/[\n,]/).map((line) => line.replace(/(^|\s)#.*$/, '').trim());
  lines.forEach((line, index) => {
    if (!line) return;
    const match = /^([^=\s]+)=([^:\s]+)(?::(read|write)(?::(\S+))?)?$/.exec(line);
    const at = `${where}, entry ${index + 1}`;
    if (!match) throw new Error(`${at}: expected key=tenant, key=tenant:read or key=tenant:write:name`);
    const [, key, tenant, role, name] = match as unknown as [string, string, string, Role | undefined, string | undefined];
    if (key.length < MIN_KEY_LENGTH || !KEY_PATTERN.test(key)) {
      throw new Error(`${at}: a key must be at least ${MIN_KEY_LENGTH} characters of letters, digits and . _ ~ + / = -`);
    }
    if (!ID_PATTERN.test(tenant)) throw new Error(`${at}: the tenant must be 1 to 128 letters, digits and . _ : - (not first)`);
    if (name !== undefined && !KEY_NAME_PATTERN.test(name)) throw new Error(`${at}: a key's name must be ${KEY_NAME_RULE}`);
    const keyDigest = digest(key);
    const hex = keyDigest.toString('hex');
    entries.push({
      digest: keyDigest,
      principal: { tenant, role: role ?? 'write', keyId: hex.slice(0, 16), name: name ?? `key-${hex.slice(0, 8)}` },
    });
  });
  return entries;
}

export interface ApiKeys {
  /** True when no keys are configured: everyone is the default tenant. */
  readonly open: boolean;
  /** The principal of a presented key, or undefined for a missing, unknown or revoked one. */
  authenticate(key: string | undefined): Principal | undefined;
  /**
   * Whether the key with this id still grants what `principal` says: checked again when a
   * request's body has arrived and its operation is about to run, since a key may be revoked
   * while a slow body is on its way (it was checked when the headers came).
   */
  stillValid(principal: Principal): boolean;
  /**
   * Re-reads the keys file every `intervalMs` and calls `onRevoked` with the ids of keys that
   * left it (or now map to another tenant or role).
   */
  watch(onRevoked: (keyIds: string[]) => void, intervalMs?: number): Disposable;
}

/** How often a watched keys file is looked at (a revoked key's streams end within about this). */
const WATCH_INTERVAL_MS = 1_000;
const granted = (entry: Entry) => `${entry.principal.tenant}:${entry.principal.role}:${entry.principal.name}`;

export interface ApiKeySources {
  /** The RUNPLANE_API_KEYS value. */
  inline?: string;
  /** A file of keys, re-read when it changes. */
  file?: string;
}

export function createApiKeys({ inline, file }: ApiKeySources, log: Logger = consoleLogger): ApiKeys {
  const fixed = inline ? parseKeys(inline, 'RUNPLANE_API_KEYS') : [];
  let fromFile: Entry[] = [];
  let fileStamp = '';
  let checkedAt = 0;
  const revocationListeners = new Set<(keyIds: string[]) => void>();
  /** Takes the file's new entries, telling listeners which keys left it (or now grant something else). */
  const replace = (entries: Entry[]) => {
    const now = new Map([...fixed, ...entries].map((entry) => [entry.principal.keyId, granted(entry)]));
    const revoked = fromFile.filter((entry) => now.get(entry.principal.keyId) !== granted(entry)).map((entry) => entry.principal.keyId);
    fromFile = entries;
    if (revoked.length > 0) for (const listener of revocationListeners) listener(revoked);
  };
  const reload = (force = false, minIntervalMs = 500) => {
    if (!file) return;
    const now = Date.now();
    if (!force && now - checkedAt < minIntervalMs) return;
    checkedAt = now;
    let stamp: string;
    try {
      const stat = statSync(file);
      stamp = `${stat.mtimeMs}:${stat.size}`;
    } catch (err) {
      if (force) throw new Error(`RUNPLANE_API_KEYS_FILE: cannot read ${file}: ${(err as Error).message}`);
      // Gone: revoke everything it held rather than keep stale keys.
      replace([]);
      fileStamp = '';
      return;
    }
    if (stamp === fileStamp) return;
    try {
      replace(parseKeys(readFileSync(file, 'utf8'), `RUNPLANE_API_KEYS_FILE ${file}`));
      fileStamp = stamp;
    } catch (err) {
      if (force) throw err;
      log.warn(`keys file not reloaded, keeping the keys read before: ${(err as Error).message}`);
    }
  };
  reload(true);
  const open = !inline && !file;
  return {
    open,
    watch(onRevoked, intervalMs = WATCH_INTERVAL_MS) {
      // Every reload tells (whoever triggers it); the timer makes sure one happens.
      revocationListeners.add(onRevoked);
      const timer = setInterval(() => reload(false, 0), intervalMs);
      timer.unref();
      return {
        [Symbol.dispose]: () => {
          clearInterval(timer);
          revocationListeners.delete(onRevoked);
        },
      };
    },
    stillValid(principal) {
      if (open) return true;
      reload();
      return [...fixed, ...fromFile].some(
        (entry) => entry.principal.keyId === principal.keyId && granted(entry) === granted({ digest: entry.digest, principal }),
      );
    },
    authenticate(key) {
      if (open) return { tenant: OPEN_TENANT, role: 'write', keyId: 'open', name: 'open' };
      if (!key) return undefined;
      reload();
      const presented = digest(key);
      let found: Principal | undefined;
      // Every entry is compared, each in constant time: how long this takes says nothing about the key.
      for (const entry of [...fixed, ...fromFile]) {
        if (timingSafeEqual(entry.digest, presented)) found ??= entry.principal;
      }
      return found;
    },
  };
}

/** The key in an `Authorization: Bearer <key>` header (or connectionParams value). */
export function bearer(value: unknown) {
  if (typeof value !== 'string') return undefined;
  const match = /^Bearer\s+(\S+)$/i.exec(value.trim());
  return match ? match[1] : undefined;
}
