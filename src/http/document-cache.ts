/**
 * Parsed and validated documents, kept for the clients that send them again, bounded in bytes
 * and shared fairly: each tenant holds at most a quarter of the bound, and when the whole is
 * full the tenant holding the most gives up its least recently used document. One key sending
 * a stream of distinct documents therefore evicts only its own, and the heap they hold stays
 * under the bound however many it sends. (yoga's own cache kept 1,024 documents by count, for
 * an hour, whoever sent them.)
 */
import type { IncomingMessage } from 'node:http';
import type { DocumentNode } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import type { Context } from '../schema/context.ts';
import { served } from './principals.ts';

/**
 * Heap a parsed document holds, by its text: about 80 bytes a character for a large one (its
 * nodes, their locations and the token list they keep), more for a small one; its validation
 * result adds little. Measured on graphql 16 (README, Limits).
 */
export const estimatedBytes = (text: string) => 2048 + 100 * text.length;

/** A tenant may hold this share of the bound. */
const TENANT_SHARE = 4;

interface Entry {
  document: DocumentNode;
  bytes: number;
  /** The validation result (the rules are the same for every request of a server). */
  errors?: readonly Error[];
}

class TenantDocuments {
  /** In use order: the first is the least recently used. */
  readonly entries = new Map<string, Entry>();
  bytes = 0;
}

export class DocumentCache {
  private readonly tenants = new Map<string, TenantDocuments>();
  private readonly byDocument = new WeakMap<DocumentNode, Entry>();
  private total = 0;
  readonly counts = { hits: 0, misses: 0, evictions: 0, tooLarge: 0 };

  constructor(readonly maxBytes: number) {}

  get bytes() {
    return this.total;
  }

  get size() {
    let size = 0;
    for (const tenant of this.tenants.values()) size += tenant.entries.size;
    return size;
  }

  get tenantMaxBytes() {
    return Math.floor(this.maxBytes / TENANT_SHARE);
  }

  /** Bytes a tenant's documents hold. */
  bytesOf(tenant: string) {
    return this.tenants.get(tenant)?.bytes ?? 0;
  }

  has(tenant: string, text: string) {
    return this.tenants.get(tenant)?.entries.has(text) ?? false;
  }

  get(tenant: string, text: string): DocumentNode | undefined {
    const own = this.tenants.get(tenant);
    const entry = own?.entries.get(text);
    if (!own || !entry) {
      this.counts.misses++;
      return undefined;
    }
    own.entries.delete(text);
    own.entries.set(text, entry);
    this.counts.hits++;
    return entry.document;
  }

  set(tenant: string, text: string, document: DocumentNode) {
    const bytes = estimatedBytes(text);
    if (bytes > this.tenantMaxBytes) {
      this.counts.tooLarge++;
      return;
    }
    let own = this.tenants.get(tenant);
    if (!own) {
      own = new TenantDocuments();
      this.tenants.set(tenant, own);
    }
    const old = own.entries.get(text);
    if (old) this.drop(tenant, own, text, old);
    // Its own documents first: a tenant at its share makes room from what it holds.
    while (own.bytes + bytes > this.tenantMaxBytes) this.evictFrom(tenant, own);
    // Then the whole: the tenant holding the most gives way.
    while (this.total + bytes > this.maxBytes) this.evictLargest();
    const entry: Entry = { document, bytes };
    own.entries.set(text, entry);
    own.bytes += bytes;
    this.total += bytes;
    this.byDocument.set(document, entry);
  }

  /** A cached document's validation result, if it was validated. */
  validated(document: DocumentNode) {
    return this.byDocument.get(document)?.errors;
  }

  setValidated(document: DocumentNode, errors: readonly Error[]) {
    const entry = this.byDocument.get(document);
    if (entry) entry.errors = errors;
  }

  private evictLargest() {
    let largest: [string, TenantDocuments] | undefined;
    for (const pair of this.tenants) if (!largest || pair[1].bytes > largest[1].bytes) largest = pair;
    if (!largest) throw new Error('document cache: over its bound with nothing in it');
    this.evictFrom(largest[0], largest[1]);
  }

  private evictFrom(tenant: string, own: TenantDocuments) {
    const first = own.entries.entries().next().value;
    if (!first) throw new Error('document cache: a tenant over its share with nothing in it');
    this.drop(tenant, own, first[0], first[1]);
    this.counts.evictions++;
  }

  private drop(tenant: string, own: TenantDocuments, text: string, entry: Entry) {
    own.entries.delete(text);
    own.bytes -= entry.bytes;
    this.total -= entry.bytes;
    this.byDocument.delete(entry.document);
    if (own.entries.size === 0) this.tenants.delete(tenant);
  }
}

/** Whose request this is, as yoga's parse and validate see it (HTTP: settled by routes.ts; WebSocket: handed in). */
function tenantOf(context: unknown) {
  const given = context as { principal?: { tenant: string }; req?: IncomingMessage };
  return given.principal?.tenant ?? (given.req ? served.get(given.req)?.principal.tenant : undefined);
}

/** The envelop plugin: parses and validates a document once while it stays in the cache. */
export function documentCaching(cache: DocumentCache): Plugin<Context> {
  return {
    onParse({ context, params, setParsedDocument }) {
      const tenant = tenantOf(context);
      if (tenant === undefined) return;
      const text = typeof params.source === 'string' ? params.source : params.source.body;
      const cached = cache.get(tenant, text);
      if (cached) {
        setParsedDocument(cached);
        return;
      }
      return ({ result }) => {
        if (result && !(result instanceof Error)) cache.set(tenant, text, result as DocumentNode);
      };
    },
    onValidate({ params, setResult }) {
      const known = cache.validated(params.documentAST);
      if (known) {
        setResult(known as never);
        return;
      }
      return ({ result }) => cache.setValidated(params.documentAST, result);
    },
  };
}
