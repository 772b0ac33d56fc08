/**
 * Chaos in short mode (test/chaos/short-mode.ts): every scenario, one after another in this one
 * file. Each runs an engine, servers and load: two at once on 2 cores starve each other (each
 * then keeps its load on until it has exercised every kind of write), and the suite takes longer.
 */
import { shortMode } from './short-mode.ts';

shortMode('engine');
shortMode('rest');
