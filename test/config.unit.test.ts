import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, test } from 'vitest';
import { FALSE_SPELLINGS, TRUE_SPELLINGS } from '../src/config/variables.ts';
import { ConfigError, loadConfig } from '../src/config.ts';

describe('configuration from the environment', () => {
  test('defaults: port 4000 on loopback, embedded engine with data on disk, table runplane', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      port: 4000,
      host: '127.0.0.1',
      table: 'runplane',
      dynamodb: { embedded: true, createTable: true, localCredentials: true, region: 'us-east-1' },
      engine: { dataDir: resolve('.runplane/data'), allowedHosts: [], cors: false },
      limits: { maxPayloadBytes: 65536 },
      graphiql: true,
    });
    // No port: the engine answers this process only.
    expect(config.engine.port).toBeUndefined();
  });

  test("the embedded engine's port: RUNPLANE_ENGINE_PORT, its names, and the credentials it checks signatures against", () => {
    expect(loadConfig({ RUNPLANE_ENGINE_PORT: '0' }).engine).toMatchObject({ port: 0, credentials: undefined });
    expect(loadConfig({ RUNPLANE_ENGINE_ALLOWED_HOSTS: 'tools.internal, db' }).engine.allowedHosts).toEqual(['tools.internal', 'db']);
    const signed = { RUNPLANE_ENGINE_PORT: '8000', AWS_ACCESS_KEY_ID: 'id', AWS_SECRET_ACCESS_KEY: 'secret' };
    expect(loadConfig(signed).engine.credentials).toEqual({ accessKeyId: 'id', secretAccessKey: 'secret' });
    // Without a port, or with another endpoint, there is nothing to sign for.
    expect(loadConfig({ ...signed, RUNPLANE_ENGINE_PORT: undefined }).engine.credentials).toBeUndefined();
    expect(() => loadConfig({ RUNPLANE_ENGINE_PORT: '0', AWS_ACCESS_KEY_ID: 'id' })).toThrow(
      'AWS_ACCESS_KEY_ID is set without AWS_SECRET_ACCESS_KEY',
    );
    expect(() => loadConfig({ RUNPLANE_ENGINE_ALLOWED_HOSTS: 'db:8000' })).toThrow('RUNPLANE_ENGINE_ALLOWED_HOSTS="db:8000"');
  });

  test('an endpoint on this machine gets its table created; a remote one uses the default credential chain', () => {
    expect(loadConfig({ AWS_ENDPOINT_URL_DYNAMODB: 'http://localhost:8000' }).dynamodb).toMatchObject({
      embedded: false,
      endpoint: 'http://localhost:8000',
      createTable: true,
      localCredentials: true,
    });
    expect(
      loadConfig({ AWS_ENDPOINT_URL_DYNAMODB: 'https://dynamodb.eu-west-1.amazonaws.com', AWS_REGION: 'eu-west-1' }).dynamodb,
    ).toMatchObject({
      createTable: false,
      localCredentials: false,
      region: 'eu-west-1',
    });
  });

  test('RUNPLANE_CREATE_TABLE decides creation explicitly (a compose network is not loopback)', () => {
    expect(loadConfig({ AWS_ENDPOINT_URL_DYNAMODB: 'http://engine:8000', RUNPLANE_CREATE_TABLE: 'true' }).dynamodb.createTable).toBe(true);
    expect(loadConfig({ RUNPLANE_CREATE_TABLE: 'false' }).dynamodb.createTable).toBe(false);
  });

  test('group commit is on unless RUNPLANE_GROUP_COMMIT=false', () => {
    expect(loadConfig({}).groupCommit).toBe(true);
    expect(loadConfig({ RUNPLANE_GROUP_COMMIT: 'false' }).groupCommit).toBe(false);
  });

  test('in memory on request; empty values count as unset', () => {
    expect(loadConfig({ RUNPLANE_IN_MEMORY: 'true', PORT: '' }).engine.dataDir).toBeUndefined();
    expect(loadConfig({ PORT: '' }).port).toBe(4000);
  });

  test.each([
    ['PORT', 'abc', /PORT="abc": must be a whole number from 0 to 65535/],
    ['PORT', '70000', /PORT="70000"/],
    ['RUNPLANE_TABLE', 'a b', /RUNPLANE_TABLE="a b": must be a DynamoDB table name/],
    ['RUNPLANE_TABLE', 'ab', /RUNPLANE_TABLE/],
    ['AWS_ENDPOINT_URL_DYNAMODB', 'not a url', /AWS_ENDPOINT_URL_DYNAMODB="not a url": must be a URL/],
    ['AWS_ENDPOINT_URL_DYNAMODB', 'ftp://x', /must be an http or https URL/],
    ['RUNPLANE_MAX_PAYLOAD_BYTES', '500000', /RUNPLANE_MAX_PAYLOAD_BYTES="500000"/],
    ['RUNPLANE_ENGINE_PORT', '-1', /RUNPLANE_ENGINE_PORT/],
    ['RUNPLANE_ENGINE_PARTITION_WCU', '0', /RUNPLANE_ENGINE_PARTITION_WCU="0": must be a whole number from 1/],
    ['RUNPLANE_API_KEYS', 'k=acme', /RUNPLANE_API_KEYS="k=acme": entry 1: a key must be at least 16 characters/],
    ['RUNPLANE_API_KEYS', 'abcdefghijklmnop=a#b', /RUNPLANE_API_KEYS=.*: entry 1: the tenant must be/],
    ['RUNPLANE_CORS_ORIGINS', 'https://app.example/path', /RUNPLANE_CORS_ORIGINS=.*: must be origins such as https:\/\/app.example.com/],
    ['RUNPLANE_CORS_ORIGINS', '*', /RUNPLANE_CORS_ORIGINS="\*": must be origins/],
    ['RUNPLANE_ALLOWED_HOSTS', 'a/b', /RUNPLANE_ALLOWED_HOSTS="a\/b": must be host names/],
    ['RUNPLANE_API_KEYS', 'abcdefghijklmnop=acme:write:a name', /entry 1: expected key=tenant, key=tenant:read or key=tenant:write:name/],
    ['RUNPLANE_API_KEYS', 'abcdefghijklmnop=acme:read:-x', /entry 1: a key's name must be 1 to 64 letters/],
  ])('%s=%s is refused with a message naming it', (name, value, message) => {
    expect(() => loadConfig({ [name]: value })).toThrow(ConfigError);
    expect(() => loadConfig({ [name]: value })).toThrow(message);
  });

  test("the embedded engine's partition limits are off unless asked for, 1,000 WCU and 3,000 RCU when on", () => {
    expect(loadConfig({}).engine.partitionLimits).toBeUndefined();
    expect(loadConfig({ RUNPLANE_ENGINE_PARTITION_LIMITS: 'true' }).engine.partitionLimits).toEqual({ writeUnits: 1000, readUnits: 3000 });
    expect(
      loadConfig({ RUNPLANE_ENGINE_PARTITION_LIMITS: 'true', RUNPLANE_ENGINE_PARTITION_WCU: '20', RUNPLANE_ENGINE_PARTITION_RCU: '60' })
        .engine.partitionLimits,
    ).toEqual({ writeUnits: 20, readUnits: 60 });
  });

  test('request bodies being read: 8 x and 1 x the largest body by default; the total never below one body, a share never above the total', () => {
    const MiB = 1024 * 1024;
    expect(loadConfig({}).bodiesInFlight).toEqual({ total: 8 * MiB, perTenant: MiB });
    expect(loadConfig({ RUNPLANE_MAX_BODY_BYTES: String(2 * MiB) }).bodiesInFlight).toEqual({ total: 16 * MiB, perTenant: 2 * MiB });
    expect(loadConfig({ RUNPLANE_BODY_BYTES_IN_FLIGHT: '4096', RUNPLANE_TENANT_BODY_BYTES_IN_FLIGHT: '2048' }).bodiesInFlight).toEqual({
      total: MiB,
      perTenant: 2048,
    });
    expect(
      loadConfig({ RUNPLANE_BODY_BYTES_IN_FLIGHT: String(2 * MiB), RUNPLANE_TENANT_BODY_BYTES_IN_FLIGHT: String(4 * MiB) }).bodiesInFlight,
    ).toEqual({
      total: 2 * MiB,
      perTenant: 2 * MiB,
    });
    expect(() => loadConfig({ RUNPLANE_TENANT_BODY_BYTES_IN_FLIGHT: '10' })).toThrow(/RUNPLANE_TENANT_BODY_BYTES_IN_FLIGHT="10"/);
  });

  test("Redis fan-out's bounds: an entry's bytes, the stream's length, each tenant's bytes a second; bad ones named", () => {
    const redis = { RUNPLANE_REDIS_URL: 'redis://127.0.0.1:6379', RUNPLANE_REDIS_SECRET: 'a-secret-of-at-least-thirty-two-characters' };
    expect(loadConfig(redis).replicas).toMatchObject({ entryBytes: 8192, streamLength: 5000, tenantBytesPerSecond: 1024 * 1024 });
    expect(
      loadConfig({
        ...redis,
        RUNPLANE_REDIS_ENTRY_BYTES: '2048',
        RUNPLANE_REDIS_STREAM_LENGTH: '1000',
        RUNPLANE_REDIS_TENANT_BYTES_PER_SECOND: '0',
      }).replicas,
    ).toMatchObject({ entryBytes: 2048, streamLength: 1000, tenantBytesPerSecond: 0 });
    expect(() => loadConfig({ ...redis, RUNPLANE_REDIS_ENTRY_BYTES: '2000000' })).toThrow(
      'RUNPLANE_REDIS_ENTRY_BYTES="2000000": must be a whole number from 1024 to 1048576',
    );
    expect(() => loadConfig({ ...redis, RUNPLANE_REDIS_STREAM_LENGTH: '10' })).toThrow(
      'RUNPLANE_REDIS_STREAM_LENGTH="10": must be a whole number from 100 to 10000000',
    );
  });

  test('every bad value is named at once', () => {
    expect(() => loadConfig({ PORT: 'x', RUNPLANE_TABLE: '!' })).toThrow(/PORT[\s\S]*RUNPLANE_TABLE/);
  });

  test('replicas: RUNPLANE_REDIS_URL turns them on, each process a holder of its own; without it one server works alone', () => {
    expect(loadConfig({}).replicas).toBeUndefined();
    const secret = 'a-secret-of-at-least-thirty-two-characters';
    const a = loadConfig({
      RUNPLANE_REDIS_URL: 'redis://127.0.0.1:6379',
      RUNPLANE_REDIS_SECRET: secret,
      RUNPLANE_REPLICA_ID: 'api-1',
    }).replicas;
    const b = loadConfig({
      RUNPLANE_REDIS_URL: 'redis://127.0.0.1:6379',
      RUNPLANE_REDIS_SECRET: secret,
      RUNPLANE_REPLICA_ID: 'api-1',
    }).replicas;
    expect(a).toMatchObject({ redisUrl: 'redis://127.0.0.1:6379', redisSecret: secret, shardLeaseSeconds: 10 });
    // One name given to two processes still makes two holders.
    expect(a?.replicaId).toMatch(/^api-1-\d+-[0-9a-f]{6}$/);
    expect(a?.replicaId).not.toBe(b?.replicaId);
    expect(() => loadConfig({ RUNPLANE_REDIS_URL: 'http://127.0.0.1:6379' })).toThrow(
      'RUNPLANE_REDIS_URL="http://127.0.0.1:6379": must be a redis:// or rediss:// URL',
    );
    expect(() => loadConfig({ RUNPLANE_REDIS_URL: 'x', RUNPLANE_SHARD_LEASE_SECONDS: '1' })).toThrow(
      /RUNPLANE_SHARD_LEASE_SECONDS="1": must be a whole number from 2 to 300/,
    );
    expect(() => loadConfig({ RUNPLANE_REPLICA_ID: '#1' })).toThrow(/RUNPLANE_REPLICA_ID="#1"/);
    // Redis entries are trusted only when sealed with a shared secret: no secret, no replicas.
    expect(() => loadConfig({ RUNPLANE_REDIS_URL: 'redis://127.0.0.1:6379' })).toThrow(
      /RUNPLANE_REDIS_URL is set without RUNPLANE_REDIS_SECRET/,
    );
    expect(() => loadConfig({ RUNPLANE_REDIS_URL: 'redis://127.0.0.1:6379', RUNPLANE_REDIS_SECRET: 'short' })).toThrow(
      /RUNPLANE_REDIS_SECRET="short": must be at least 32 characters/,
    );
  });

  test('the replicas compose file sets what the configuration accepts', () => {
    // biome-ignore lint/suspicious/noTemplateCurlyInString: compose's own interpolation, as the file holds it
    const REQUIRED_SECRET = '"${RUNPLANE_REDIS_SECRET:?set RUNPLANE_REDIS_SECRET, the same for every replica (openssl rand -hex 32)}"';
    const compose = readFileSync('docker-compose.replicas.yml', 'utf8');
    const values = (name: string) => [...compose.matchAll(new RegExp(`^\\s+${name}: (.+)$`, 'gm'))].map((m) => m[1] as string);
    expect(values('RUNPLANE_REDIS_URL')).toEqual(['redis://redis:6379', 'redis://redis:6379']);
    // Both replicas take the one secret from the environment compose runs in, and compose refuses to start without it.
    expect(values('RUNPLANE_REDIS_SECRET')).toEqual([REQUIRED_SECRET, REQUIRED_SECRET]);
    for (const id of values('RUNPLANE_REPLICA_ID')) {
      const secret = 'the-compose-file-asks-for-one-of-32-characters';
      expect(
        loadConfig({ RUNPLANE_REDIS_URL: 'redis://redis:6379', RUNPLANE_REDIS_SECRET: secret, RUNPLANE_REPLICA_ID: id }).replicas
          ?.replicaId,
      ).toContain(id);
    }
  });
});

describe('switches: every boolean variable takes the same spellings', () => {
  /** Each switch, what it reads as from a loaded configuration, and what it is when unset. */
  const switches: [name: string, read: (env: Record<string, string>) => boolean, unset: boolean][] = [
    ['RUNPLANE_IN_MEMORY', (env) => loadConfig(env).engine.dataDir === undefined, false],
    ['RUNPLANE_ENGINE_PARTITION_LIMITS', (env) => loadConfig(env).engine.partitionLimits !== undefined, false],
    ['RUNPLANE_ENGINE_CORS', (env) => loadConfig(env).engine.cors, false],
    ['RUNPLANE_GRAPHIQL', (env) => loadConfig(env).graphiql, true],
    ['RUNPLANE_CONSOLE', (env) => loadConfig(env).console, true],
    ['RUNPLANE_INTROSPECTION', (env) => loadConfig(env).introspection, true],
    ['RUNPLANE_CREATE_TABLE', (env) => loadConfig(env).dynamodb.createTable, true],
    ['RUNPLANE_GROUP_COMMIT', (env) => loadConfig(env).groupCommit, true],
    // Read where it matters: production without keys starts only with it on.
    [
      'RUNPLANE_ALLOW_OPEN',
      (env) => {
        try {
          return loadConfig({ NODE_ENV: 'production', ...env }).production;
        } catch (err) {
          if (err instanceof ConfigError && /would serve every caller as one tenant/.test(err.message)) return false;
          throw err;
        }
      },
      false,
    ],
  ];
  const spellings = (words: readonly string[]) =>
    words.flatMap((word) => [word, word.toUpperCase(), word.charAt(0).toUpperCase() + word.slice(1)]);
  const refused = ['maybe', '2', '-1', '10', 'tru', 'truee', 'yes please', 'ja', 'null', 'undefined', ' true', 'false ', 'o n'];

  test.each(switches)('%s: every spelling of true and of false, in any case', (name, read) => {
    for (const value of spellings(TRUE_SPELLINGS)) expect(read({ [name]: value }), `${name}=${value}`).toBe(true);
    for (const value of spellings(FALSE_SPELLINGS)) expect(read({ [name]: value }), `${name}=${value}`).toBe(false);
  });

  test.each(switches)('%s: unset or empty, its default', (name, read, unset) => {
    expect(read({})).toBe(unset);
    expect(read({ [name]: '' })).toBe(unset);
  });

  test.each(switches)('%s: anything else is refused with a message naming the variable, the value and the spellings', (name, read) => {
    for (const value of refused) {
      expect(() => read({ [name]: value }), `${name}=${JSON.stringify(value)}`).toThrow(ConfigError);
      expect(() => read({ [name]: value })).toThrow(
        `${name}=${JSON.stringify(value)}: must be true or false (true/false, 1/0, yes/no, on/off, y/n, enabled/disabled; any case)`,
      );
    }
  });

  test("README's configuration section states the spellings the switches take", () => {
    const readme = readFileSync('README.md', 'utf8').replace(/\s+/g, ' ');
    const pairs = TRUE_SPELLINGS.map((t, i) => `\`${t}\`/\`${FALSE_SPELLINGS[i]}\``);
    expect(readme).toContain(`takes ${pairs.slice(0, -1).join(', ')} or ${pairs.at(-1)}, in any case`);
  });
});

describe('RUNPLANE_* variables the server does not read', () => {
  test('each is named in a warning, its value never; a client-only one says where it belongs', () => {
    const { warnings } = loadConfig({ RUNPLANE_API_KEY: 'secret-value-1', RUNPLANE_MAX_PAYLOD_BYTES: '10', RUNPLANE_TABLE: 'runs' });
    expect(warnings).toHaveLength(2);
    expect(warnings[0]).toMatch(/^RUNPLANE_API_KEY is set but the server does not read it: .*RUNPLANE_API_KEYS/);
    expect(warnings[1]).toMatch(/^RUNPLANE_MAX_PAYLOD_BYTES is set but the server does not read it: no such setting/);
    expect(warnings.join('\n')).not.toMatch(/secret-value-1|10/);
  });

  test('none for the ones it reads, nor for the test tools of this repository', () => {
    expect(
      loadConfig({ RUNPLANE_TABLE: 'runs', RUNPLANE_DEBUG: '1', RUNPLANE_PROCESS_BUNDLES: '/x', RUNPLANE_TEST_DYNAMODB_ENDPOINT: 'x' })
        .warnings,
    ).toEqual([]);
  });
});
