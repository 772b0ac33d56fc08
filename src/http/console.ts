/**
 * The run console's files, served from this process at `/` (no CDN: it works offline). They
 * are read once, at start, compressed once, when first asked for in that encoding (brotli at
 * its best costs a tenth of a second of CPU, which a server that never serves the console
 * need not spend), and revalidated by ETag. The console is a client of
 * the public API like any other: it holds no key and no data of its own.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { brotliCompressSync, constants, gzipSync } from 'node:zlib';

interface Asset {
  type: string;
  etag: string;
  identity: Buffer;
  br(): Buffer;
  gzip(): Buffer;
}

/** `make()`'s value, computed on the first call and kept. */
function once<T>(make: () => T): () => T {
  let value: { made: T } | undefined;
  return () => {
    value ??= { made: make() };
    return value.made;
  };
}

/** Where each path's file is, beside this module. */
const FILES: Record<string, { file: string; type: string }> = {
  '/': { file: '../console/index.html', type: 'text/html; charset=utf-8' },
  '/console/app.js': { file: '../console/dist/app.js', type: 'text/javascript; charset=utf-8' },
  '/console/style.css': { file: '../console/style.css', type: 'text/css; charset=utf-8' },
};

/** Scripts and styles of this origin only; requests and sockets to this origin only. */
const SECURITY_HEADERS = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
};

function load(file: string, type: string): Asset {
  const identity = readFileSync(new URL(file, import.meta.url));
  return {
    type,
    etag: `"${createHash('sha256').update(identity).digest('base64url').slice(0, 22)}"`,
    identity,
    br: once(() => brotliCompressSync(identity, { params: { [constants.BROTLI_PARAM_QUALITY]: 11 } })),
    gzip: once(() => gzipSync(identity, { level: 9 })),
  };
}

export function consoleFiles() {
  const assets = new Map(Object.entries(FILES).map(([path, { file, type }]) => [path, load(file, type)]));
  return {
    /** The bytes each file costs a browser that takes gzip (what README states). */
    gzippedBytes: () => [...assets.values()].reduce((sum, asset) => sum + asset.gzip().length, 0),
    /** Answers a GET for one of the console's files; false for any other request. */
    serve(req: IncomingMessage, res: ServerResponse, path: string | undefined) {
      if (req.method !== 'GET' && req.method !== 'HEAD') return false;
      const asset = assets.get(path === '/index.html' ? '/' : (path ?? ''));
      if (!asset) return false;
      const headers = { etag: asset.etag, 'cache-control': 'no-cache', vary: 'accept-encoding', ...SECURITY_HEADERS };
      if (req.headers['if-none-match'] === asset.etag) {
        res.writeHead(304, headers);
        res.end();
        return true;
      }
      const accepted = String(req.headers['accept-encoding'] ?? '');
      const [encoding, body] = /\bbr\b/.test(accepted)
        ? (['br', asset.br()] as const)
        : /\bgzip\b/.test(accepted)
          ? (['gzip', asset.gzip()] as const)
          : ([undefined, asset.identity] as const);
      res.writeHead(200, {
        ...headers,
        'content-type': asset.type,
        'content-length': body.length,
        ...(encoding ? { 'content-encoding': encoding } : {}),
      });
      res.end(req.method === 'HEAD' ? undefined : body);
      return true;
    },
  };
}

export type ConsoleFiles = ReturnType<typeof consoleFiles>;
