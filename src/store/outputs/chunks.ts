/**
 * A run's output streams in the table: each one chunks of text in its run's partition, after
 * the events, keyed by the code point each starts at. A chunk is a put conditioned on its key
 * being free, so a stream's text at an offset is written once: a second writer finds it there
 * and compares. The stream's own row (written with its first chunk) lists it in `Run.outputs`
 * and, once final, holds its length.
 */
import { GetCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { ClaimLost, RunNotFound } from '../../domain/errors.ts';
import { MAX_INT } from '../../domain/limits.ts';
import { endOf, type OutputChunk, type OutputStream, slicePoints } from '../../domain/output.ts';
import { attr } from '../../table/attributes.ts';
import { outputChunkItem, toClaim, toOutputChunk, toOutputStream } from '../../table/codec.ts';
import { conditions } from '../../table/conditions.ts';
import { keys } from '../../table/keys.ts';
import type { ResponseLimit, StoreDeps } from '../deps.ts';
import { pastTtl } from '../expiry.ts';
import { queryPages } from '../query-pages.ts';
import { metered, type TableReads } from '../reads.ts';
import { fence } from '../runs/claim-writes.ts';
import { ConditionFailed, type Write, write } from '../write.ts';

/** What a stream's table rows say: how far its chunks reach without a gap, and whether the last is final. */
export interface StoredEnd {
  length: number;
  final: boolean;
}

/** Chunks read per Query when reading a stream's text. */
const PAGE_CHUNKS = 100;
/**
 * Queries one read of a stream's text makes at most: text written a few code points at a time
 * is many small chunks, and a read stops here (saying there is more) rather than at 1 MB.
 */
export const MAX_OUTPUT_READ_PAGES = 8;

export function createOutputStore(deps: StoreDeps) {
  const { doc, tableName, now } = deps;
  const chunkRange = (tenant: string, runId: string, stream: string, from: number) => ({
    KeyConditionExpression: 'pk = :pk AND sk BETWEEN :from AND :to',
    ExpressionAttributeValues: {
      ':pk': keys.runPartition(tenant, runId),
      ':from': keys.outputChunk(tenant, runId, stream, from).sk,
      ':to': keys.outputChunks(stream).last,
    },
  });

  /** @throws RunNotFound unless the run exists and has not expired */
  async function ensureRun(tenant: string, runId: string, reads?: TableReads) {
    const { Item } = await metered(doc, reads).send(
      new GetCommand({
        TableName: tableName,
        Key: keys.run(tenant, runId),
        ConsistentRead: true,
        ProjectionExpression: 'pk, #ttl',
        ExpressionAttributeNames: { '#ttl': attr.ttl },
      }),
    );
    if (!Item || pastTtl(Item, now().getTime())) throw new RunNotFound(runId);
  }

  /** The chunk holding code point `offset` (the last one starting at or before it), strongly consistent. */
  async function chunkHolding(tenant: string, runId: string, stream: string, offset: number, reads?: TableReads) {
    const { Items = [] } = await metered(doc, reads).send(
      new QueryCommand({
        TableName: tableName,
        KeyConditionExpression: 'pk = :pk AND sk BETWEEN :from AND :to',
        ExpressionAttributeValues: {
          ':pk': keys.runPartition(tenant, runId),
          ':from': keys.outputChunks(stream).first,
          ':to': keys.outputChunk(tenant, runId, stream, offset).sk,
        },
        ScanIndexForward: false,
        Limit: 1,
        ConsistentRead: true,
      }),
    );
    return Items[0] ? toOutputChunk(Items[0]) : undefined;
  }

  /**
   * The stream's text from `afterOffset` on, as far as its chunks reach without a gap (at most
   * about `maxBytes` of it, whole chunks), strongly consistent; `final` once it reached the end.
   */
  async function read(
    tenant: string,
    runId: string,
    stream: string,
    afterOffset: number,
    { maxBytes = 1024 * 1024, responseLimit, reads }: { maxBytes?: number; responseLimit?: ResponseLimit; reads?: TableReads } = {},
  ): Promise<OutputChunk & { end: number; more: boolean }> {
    // From 0 the first chunk starts there: no read to find the one holding the offset.
    const first = afterOffset === 0 ? { offset: 0, text: '' } : await chunkHolding(tenant, runId, stream, afterOffset, reads);
    // Nothing stored reaches afterOffset yet (or nothing at all): no text, not final.
    if (!first || endOf(first) < afterOffset)
      return { runId, stream, offset: afterOffset, text: '', final: false, end: afterOffset, more: false };
    let text = '';
    let end = first.offset;
    let final = false;
    let bytes = 0;
    /** Stopped at maxBytes: more may be stored after `end`. */
    let more = false;
    const pages = queryPages(metered(doc, reads), {
      TableName: tableName,
      ...chunkRange(tenant, runId, stream, first.offset),
      Limit: PAGE_CHUNKS,
      ConsistentRead: true,
    });
    let pagesRead = 0;
    reading: for await (const page of pages) {
      pagesRead++;
      for (const item of page.Items ?? []) {
        const chunk = toOutputChunk(item);
        // A gap (a chunk not written yet, or a bypassing writer's hole): the text stops before it.
        if (chunk.offset !== end) break reading;
        // Bounded before the next chunk, not after it: an empty closing chunk still comes along.
        if (bytes >= maxBytes && chunk.text) {
          more = true;
          break reading;
        }
        text += chunk.text;
        end = endOf(chunk);
        bytes += Buffer.byteLength(chunk.text);
        final = chunk.final;
        if (final) break reading;
      }
      if (pagesRead >= MAX_OUTPUT_READ_PAGES && page.LastEvaluatedKey) {
        more = true;
        break;
      }
    }
    // The first chunk may start before afterOffset: its head was not asked for.
    const chunk = { runId, stream, offset: afterOffset, text: slicePoints(text, afterOffset - first.offset), final, end, more };
    // As the response will carry it: a JSON string (a control character takes 6 bytes there, a quote 2).
    responseLimit?.spend(Buffer.byteLength(JSON.stringify(chunk.text)));
    return chunk;
  }

  /** Where the stream's stored text ends (its last chunk's end: chunks are written in order by one writer at a time). */
  async function storedEnd(tenant: string, runId: string, stream: string, reads?: TableReads): Promise<StoredEnd> {
    const last = await chunkHolding(tenant, runId, stream, MAX_INT, reads);
    return last ? { length: endOf(last), final: last.final } : { length: 0, final: false };
  }

  return {
    ensureRun,
    storedEnd,
    read,
    chunkAt: async (tenant: string, runId: string, stream: string, offset: number) => {
      const { Item } = await doc.send(
        new GetCommand({ TableName: tableName, Key: keys.outputChunk(tenant, runId, stream, offset), ConsistentRead: true }),
      );
      return Item ? toOutputChunk(Item) : undefined;
    },

    /**
     * Writes a chunk if its offset is free (with the stream's row when it is the first or the
     * final one; fenced by a claim's token): false when another chunk already starts there.
     * @throws ClaimLost when fenced by a token that is not the run's live claim (nothing is written)
     */
    async put(tenant: string, chunk: OutputChunk, fencingToken?: number): Promise<boolean> {
      const at = now();
      const writes: Write[] = [
        { Put: { TableName: tableName, Item: outputChunkItem(tenant, chunk, at), ConditionExpression: conditions.absent } },
      ];
      if (chunk.offset === 0 || chunk.final) writes.push({ Update: streamRowUpdate(tableName, tenant, chunk, at) });
      if (fencingToken !== undefined) writes.push(fence(tableName, tenant, chunk.runId, fencingToken, at.getTime()));
      try {
        await write(deps, writes, undefined, { operation: 'output' });
        return true;
      } catch (err) {
        if (!(err instanceof ConditionFailed)) throw err;
        const fenceFailed = fencingToken !== undefined ? err.failedAt(writes.length - 1) : undefined;
        if (fenceFailed) throw new ClaimLost(chunk.runId, toClaim(fenceFailed.item), at.getTime(), fencingToken);
        return false;
      }
    },

    /** The names of the run's first `most` output streams stored (one Query of their rows' keys). */
    async streamNames(tenant: string, runId: string, most: number): Promise<string[]> {
      const { Items = [] } = await doc.send(
        new QueryCommand({
          TableName: tableName,
          KeyConditionExpression: 'pk = :pk AND sk BETWEEN :from AND :to',
          ExpressionAttributeValues: {
            ':pk': keys.runPartition(tenant, runId),
            ':from': keys.outputStreams.first,
            ':to': keys.outputStreams.last,
          },
          ProjectionExpression: 'pk, sk',
          Limit: most,
          ConsistentRead: true,
        }),
      );
      return Items.map((item) => toOutputStream(item).stream);
    },

    /**
     * The run's first `most` output streams by name, from their rows (one Query); a stream not
     * final reads its stored end (one Query each): at most 1 + `most` reads.
     */
    async list(tenant: string, runId: string, { most, reads }: { most: number; reads?: TableReads }): Promise<OutputStream[]> {
      const { Items = [] } = await metered(doc, reads).send(
        new QueryCommand({
          TableName: tableName,
          KeyConditionExpression: 'pk = :pk AND sk BETWEEN :from AND :to',
          ExpressionAttributeValues: {
            ':pk': keys.runPartition(tenant, runId),
            ':from': keys.outputStreams.first,
            ':to': keys.outputStreams.last,
          },
          Limit: most,
        }),
      );
      return Promise.all(
        Items.map(toOutputStream).map(async (row) =>
          row.final && row.length !== undefined
            ? { stream: row.stream, length: row.length, final: true }
            : { stream: row.stream, ...(await storedEnd(tenant, runId, row.stream, reads)) },
        ),
      );
    },
  };
}

/** The stream's row: there from its first chunk on; final, with its length, once its last chunk is written. */
function streamRowUpdate(tableName: string, tenant: string, chunk: OutputChunk, at: Date) {
  return {
    TableName: tableName,
    Key: keys.outputStream(tenant, chunk.runId, chunk.stream),
    UpdateExpression: `SET #entity = :entity, #runId = :runId, #stream = :stream, #createdAt = if_not_exists(#createdAt, :at)${
      chunk.final ? ', #final = :final, #length = :length' : ''
    }`,
    ExpressionAttributeNames: {
      '#entity': attr.entity,
      '#runId': attr.runId,
      '#stream': attr.stream,
      '#createdAt': attr.createdAt,
      ...(chunk.final ? { '#final': attr.final, '#length': attr.length } : {}),
    },
    ExpressionAttributeValues: {
      ':entity': 'outputStream',
      ':runId': chunk.runId,
      ':stream': chunk.stream,
      ':at': at.toISOString(),
      ...(chunk.final ? { ':final': true, ':length': endOf(chunk) } : {}),
    },
  };
}

export type OutputStore = ReturnType<typeof createOutputStore>;
