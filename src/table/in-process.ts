/**
 * An SDK request handler that hands requests to the embedded engine in this process instead
 * of sending them over loopback HTTP: the SDK still serializes, validates and parses every
 * request and answer as against DynamoDB; only the socket is skipped.
 */
import type { HttpRequest, HttpResponse } from '@smithy/types';

export type Answer = (target: string, body: string) => Promise<{ status: number; body: string }>;

export function inProcessHandler(answer: Answer) {
  return {
    async handle(request: HttpRequest): Promise<{ response: HttpResponse }> {
      const header = (name: string) => Object.entries(request.headers).find(([key]) => key.toLowerCase() === name)?.[1] ?? '';
      const bytes = request.body as Uint8Array | string | undefined;
      // Buffer.from(bytes) would call the SDK body's valueOf (a string, with a warning): view the bytes instead.
      const body =
        typeof bytes === 'string' ? bytes : bytes ? Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8') : '';
      const result = await answer(header('x-amz-target'), body);
      return {
        response: {
          statusCode: result.status,
          headers: { 'content-type': 'application/x-amz-json-1.0' },
          body: Buffer.from(result.body, 'utf8'),
        },
      };
    },
    updateHttpClientConfig() {},
    httpHandlerConfigs() {
      return {};
    },
    destroy() {},
  };
}
