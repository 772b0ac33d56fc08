/** Chaos in short mode (test/chaos/short-mode.ts): every scenario but the engine's and the servers' (stalled readers, lease stalls, the replicas over Redis). */
import { shortMode } from './short-mode.ts';

shortMode('rest');
