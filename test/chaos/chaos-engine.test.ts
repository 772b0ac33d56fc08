/** Chaos in short mode (test/chaos/short-mode.ts): the engine and the servers killed, restarted and throttled. */
import { shortMode } from './short-mode.ts';

shortMode('engine');
