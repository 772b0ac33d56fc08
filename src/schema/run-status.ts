import { runStatuses } from '../domain/run.ts';
import { builder } from './builder.ts';

export const RunStatusEnum = builder.enumType('RunStatus', { values: runStatuses });
