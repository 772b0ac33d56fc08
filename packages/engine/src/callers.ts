/**
 * Who may use an engine port. A web page can reach a port on loopback too: by a name of its own
 * that it makes resolve to 127.0.0.1 (DNS rebinding), then as the same origin. So a request must
 * name the engine by a loopback name, by the address it reached it at (an IP literal cannot be
 * rebound), or by a name allowed explicitly; and a browser's request (one with an Origin,
 * preflights included) is served only with CORS on.
 */
import type { IncomingMessage } from 'node:http';
import { isIP } from 'node:net';
import { EngineError } from './errors.ts';

export interface CallerPolicy {
  /** Names served besides loopback ones and the engine's own addresses (lowercase). */
  allowedHosts: readonly string[];
  /** Browsers served (with CORS headers for any origin). */
  cors: boolean;
  /** How refusals name the settings that would serve the request (the flags, or an embedder's own). */
  settingNames: { allowedHosts: string; cors: string };
}

/** The hostname of a Host header (`[::1]:8000` -> `::1`, `localhost.` -> `localhost`), lowercased. */
export function hostnameOf(host: string) {
  const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(host);
  if (bracketed) return (bracketed[1] as string).toLowerCase();
  return host.replace(/:\d+$/, '').replace(/\.$/, '').toLowerCase();
}

/** ::ffff:7f00:1 is ::ffff:127.0.0.1 as a browser writes it. */
const mappedLoopback = /^::ffff:(127\.\d{1,3}\.\d{1,3}\.\d{1,3}|7f[0-9a-f]{2}:[0-9a-f]{1,4})$/;

export const isLoopbackName = (name: string) =>
  name === 'localhost' ||
  name.endsWith('.localhost') ||
  (isIP(name) === 4 && name.startsWith('127.')) ||
  name === '::1' ||
  mappedLoopback.test(name);

/**
 * Whether a request naming `host` is served: a loopback name, the IP literal of the address the
 * request reached (`localAddress`, the socket's), or an allowed name.
 */
export function hostServed(host: string | undefined, localAddress: string | undefined, allowed: ReadonlySet<string>) {
  if (!host) return false;
  const name = hostnameOf(host);
  if (isLoopbackName(name) || allowed.has(name)) return true;
  const own = localAddress?.toLowerCase().replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/, '');
  return isIP(name) !== 0 && name === own;
}

const accessDenied = (message: string) => new EngineError(400, 'com.amazon.coral.service#AccessDeniedException', message);

/** Refuses a request by a name that is not the engine's, or from a browser without CORS on. */
export function callerCheck({ allowedHosts, cors, settingNames }: CallerPolicy) {
  const allowed = new Set(allowedHosts.map((name) => name.toLowerCase()));
  return (req: IncomingMessage): EngineError | undefined => {
    const host = req.headers.host;
    if (!hostServed(host, req.socket.localAddress, allowed)) {
      const shown = host === undefined ? 'A request without a Host header' : `Host '${host.slice(0, 100)}'`;
      return accessDenied(
        `${shown} is not a loopback name or this engine's address, so it may be a web page's name rebound to it: refused. To serve that name, allow it with ${settingNames.allowedHosts}`,
      );
    }
    const origin = req.headers.origin;
    if (origin !== undefined && !cors) {
      return accessDenied(
        `Requests from browsers (Origin '${origin.slice(0, 200)}') are refused: turn on ${settingNames.cors} to serve a browser-based tool`,
      );
    }
    return undefined;
  };
}
