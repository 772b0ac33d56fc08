/** Who is asking: every key in the table starts with the tenant, so a principal sees its tenant's rows only. */

/** What an API key allows: read-only keys may query and subscribe, not mutate. */
export type Role = 'write' | 'read';

export interface Principal {
  tenant: string;
  role: Role;
  /** Which key it presented (a prefix of the key's digest; 'open' without keys): revoking it ends what it opened. */
  keyId: string;
  /**
   * The key's name (`key=tenant:role:name`; unnamed: `key-` and 8 hex digits of its digest;
   * 'open' without keys): what the server records as who decided, never a caller-written string.
   */
  name: string;
}

/** Key names: what `key=tenant:role:name` may say. */
export const KEY_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._@+-]{0,63}$/;
export const KEY_NAME_RULE = '1 to 64 letters, digits and . _ @ + - (not first)';
