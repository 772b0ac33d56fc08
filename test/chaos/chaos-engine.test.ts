/** Chaos in short mode (test/chaos/short-mode.ts): the engine and the servers killed, restarted and throttled; expired iterators and lost answers. */
import { shortMode } from './short-mode.ts';

shortMode('engine');
