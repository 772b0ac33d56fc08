/**
 * Parsed documents that passed validation, kept for the clients that send them again, bounded
 * in bytes and shared fairly: each tenant holds at most a quarter of the bound, and when the
 * whole is full the tenant holding the most gives up its least recently used document. One key
 * sending a stream of distinct documents therefore evicts only its own, and the heap they hold
 * stays under the bound however many it sends. A document that fails to parse or validate is
 * not kept (its errors could outweigh it). (yoga's own cache kept 1,024 documents by count,
 * for an hour, whoever sent them, with their validation errors.)
 */
import type { IncomingMessage } from 'node:http';
import type { DocumentNode, Token } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import type { Context } from '../schema/context.ts';
import { served } from './principals.ts';

/**
 * Heap a parsed document holds, from its text and its tokens: each token keeps a Token and most
 * an AST node with its location (280 to 490 bytes a token measured on graphql 16, for documents
 * from 10 to 1,500 tokens), the text itself a byte or two a character. An estimate above every
 * measured kind (README, Limits).
 */
export const estimatedBytes = (text: string, tokens: number) => 1024 + 2 * text.length + 500 * tokens;

/** The tokens of a parsed document (it keeps its token list). */
export function tokenCount(document: DocumentNode) {
  let count = 0;
  for (let token: Token | null | undefined = document.loc?.startToken; token; token = token.next) count++;
  return count;
}

/** A tenant may hold this share of the bound. */
const TENANT_SHARE = 4;

interface Entry {
  document: DocumentNode;
  bytes: number;
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

  /** Keeps a document that passed validation (a hit skips parsing and validating it). */
  set(tenant: string, text: string, document: DocumentNode) {
    const bytes = estimatedBytes(text, tokenCount(document));
    if (bytes > this.tenantMaxBytes) {
      this.counts.tooLarge++;
      return;
    }
    const old = this.tenants.get(tenant)?.entries.get(text);
    if (old) this.drop(tenant, text, old);
    // Its own documents first: a tenant at its share makes room from what it holds.
    while (this.bytesOf(tenant) + bytes > this.tenantMaxBytes) this.evictFrom(tenant);
    // Then the whole: the tenant holding the most gives way.
    while (this.total + bytes > this.maxBytes) this.evictLargest();
    // Looked up only now: making room may have emptied the tenant, and an empty one is forgotten.
    let own = this.tenants.get(tenant);
    if (!own) {
      own = new TenantDocuments();
      this.tenants.set(tenant, own);
    }
    const entry: Entry = { document, bytes };
    own.entries.set(text, entry);
    own.bytes += bytes;
    this.total += bytes;
    this.byDocument.set(document, entry);
  }

  /** Whether this very document is one kept (it passed validation when it was kept). */
  holds(document: DocumentNode) {
    return this.byDocument.has(document);
  }

  private evictLargest() {
    let largest: string | undefined;
    let most = -1;
    for (const [tenant, own] of this.tenants) if (own.bytes > most) [largest, most] = [tenant, own.bytes];
    if (largest === undefined) throw new Error(`document cache: ${this.total} bytes counted with nothing in it`);
    this.evictFrom(largest);
  }

  private evictFrom(tenant: string) {
    const first = this.tenants.get(tenant)?.entries.entries().next().value;
    if (!first) throw new Error(`document cache: tenant ${tenant} over its share with nothing in it`);
    this.drop(tenant, first[0], first[1]);
    this.counts.evictions++;
  }

  private drop(tenant: string, text: string, entry: Entry) {
    const own = this.tenants.get(tenant);
    if (!own?.entries.delete(text)) return;
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
  /** Documents parsed for a miss, until their validation says whether they are kept. */
  const parsed = new WeakMap<DocumentNode, { tenant: string; text: string }>();
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
        if (result && !(result instanceof Error)) parsed.set(result as DocumentNode, { tenant, text });
      };
    },
    onValidate({ params, setResult }) {
      // A kept document passed validation under the same rules (they are the same for every request).
      if (cache.holds(params.documentAST)) {
        setResult([]);
        return;
      }
      const source = parsed.get(params.documentAST);
      if (!source) return;
      parsed.delete(params.documentAST);
      return ({ result }) => {
        if (result.length === 0) cache.set(source.tenant, source.text, params.documentAST);
      };
    },
  };
}
