/**
 * What a browser may do from where: a request (or WebSocket upgrade) that carries an Origin is
 * served only from this server's own origin or one listed in RUNPLANE_CORS_ORIGINS, which
 * alone get CORS headers. The refusal comes before anything runs, so a page elsewhere cannot
 * even cause a mutation it could not read the answer of (a form post or a WebSocket needs no
 * preflight). Served open (no keys), a request must also name this server by an address it
 * answers on or a loopback name, so a page whose DNS name rebinds to 127.0.0.1 reaches nothing.
 */
import type { IncomingMessage } from 'node:http';
import { networkInterfaces, hostname as osHostname } from 'node:os';

export interface BrowserPolicyOptions {
  /** Origins (`scheme://host[:port]`) allowed besides this server's own. */
  corsOrigins: readonly string[];
  /** True when no API keys are configured: the Host is checked too. */
  open: boolean;
  /** The address the server listens on (HOST). */
  listenHost: string;
  /** Further names the server may be reached by (RUNPLANE_ALLOWED_HOSTS). */
  allowedHosts: readonly string[];
}

/** Request headers a listed origin may send, and how long its browser may keep a preflight's answer. */
const ALLOWED_HEADERS = 'authorization, content-type, accept, last-event-id, x-graphql-yoga-csrf';
const PREFLIGHT_MAX_AGE_SECONDS = 600;

/** The hostname of a Host header (`[::1]:4000` -> `::1`), lowercased; undefined when there is none. */
export function hostnameOf(host: string | undefined) {
  if (!host) return undefined;
  const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(host);
  // A fully qualified name may end in a dot (`localhost.`): the same name.
  if (bracketed) return bracketed[1]?.toLowerCase();
  return host.replace(/:\d+$/, '').replace(/\.$/, '').toLowerCase();
}

/** ::ffff:7f00:1 is ::ffff:127.0.0.1 as a browser writes it. */
const mappedLoopback = /^::ffff:(127\.\d{1,3}\.\d{1,3}\.\d{1,3}|7f[0-9a-f]{2}:[0-9a-f]{1,4})$/;

const isLoopbackName = (name: string) =>
  name === 'localhost' || name.endsWith('.localhost') || /^127(\.\d{1,3}){3}$/.test(name) || name === '::1' || mappedLoopback.test(name);

const ANY_ADDRESS = new Set(['0.0.0.0', '::', '']);

export function browserPolicy(options: BrowserPolicyOptions) {
  const listed = new Set(options.corsOrigins);
  const names = new Set(options.allowedHosts.map((name) => name.toLowerCase()));
  const listen = options.listenHost.toLowerCase().replace(/^\[|\]$/g, '');
  if (!ANY_ADDRESS.has(listen)) names.add(listen);
  else {
    // Listening everywhere: every address of this machine, its name, and the any-address as
    // typed (a browser reaches it as this machine; no other site's name resolves to a Host of it).
    for (const addresses of Object.values(networkInterfaces())) for (const { address } of addresses ?? []) names.add(address.toLowerCase());
    names.add(osHostname().toLowerCase());
    names.add('0.0.0.0');
    names.add('::');
  }

  const hostAllowed = (host: string | undefined) => {
    if (!options.open) return true;
    const name = hostnameOf(host);
    return name !== undefined && (isLoopbackName(name) || names.has(name));
  };

  /** The origin is this server's own: the same host:port the request was sent to. */
  const sameOrigin = (origin: string, host: string | undefined) => {
    if (!host || !URL.canParse(origin)) return false;
    const url = new URL(origin);
    return (url.protocol === 'http:' || url.protocol === 'https:') && url.host.toLowerCase() === host.toLowerCase();
  };

  return {
    /**
     * Why a request is refused, or undefined to serve it: a Host this open server does not
     * answer to, or an Origin that is neither its own nor listed.
     */
    refusal(req: IncomingMessage): string | undefined {
      const host = req.headers.host;
      if (!hostAllowed(host)) {
        const shown = host === undefined ? 'no Host' : `Host ${JSON.stringify(host.slice(0, 100))}`;
        return `${shown} is not a name this server answers to without API keys: use a loopback name or its address, list the name in RUNPLANE_ALLOWED_HOSTS, or configure RUNPLANE_API_KEYS`;
      }
      const origin = req.headers.origin;
      if (origin === undefined || sameOrigin(origin, host) || listed.has(origin)) return undefined;
      return `Requests from origin ${JSON.stringify(origin.slice(0, 200))} are refused: list it in RUNPLANE_CORS_ORIGINS to allow it`;
    },
    /** CORS response headers for a listed origin (none for the server's own origin, or none at all). */
    corsHeaders(req: IncomingMessage): Record<string, string> | undefined {
      const origin = req.headers.origin;
      if (origin === undefined || !listed.has(origin)) return undefined;
      return { 'access-control-allow-origin': origin, vary: 'Origin', 'access-control-expose-headers': 'content-type' };
    },
    /** The answer to a listed origin's preflight. */
    preflightHeaders(req: IncomingMessage): Record<string, string> | undefined {
      const cors = this.corsHeaders(req);
      if (!cors) return undefined;
      return {
        ...cors,
        'access-control-allow-methods': 'GET, POST, OPTIONS',
        'access-control-allow-headers': ALLOWED_HEADERS,
        'access-control-max-age': String(PREFLIGHT_MAX_AGE_SECONDS),
      };
    },
  };
}

export type BrowserPolicy = ReturnType<typeof browserPolicy>;

/** An origin as RUNPLANE_CORS_ORIGINS lists it: scheme, host and port only. */
export function isOrigin(value: string) {
  if (!URL.canParse(value)) return false;
  const url = new URL(value);
  return (url.protocol === 'http:' || url.protocol === 'https:') && url.origin === value;
}
