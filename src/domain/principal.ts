/** Who is asking: every key in the table starts with the tenant, so a principal sees its tenant's rows only. */

/** What an API key allows: read-only keys may query and subscribe, not mutate. */
export type Role = 'write' | 'read';

export interface Principal {
  tenant: string;
  role: Role;
  /** Which key it presented (a prefix of the key's digest; 'open' without keys): revoking it ends what it opened. */
  keyId: string;
}
