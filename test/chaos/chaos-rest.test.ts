/** Chaos in short mode (test/chaos/short-mode.ts): every other scenario (the replicas over Redis among them). */
import { shortMode } from './short-mode.ts';

shortMode('rest');
