import { recordReaders } from '../rows.js'

export { RECORDABLE, type Row } from '../rows.js'

/** pg returns timestamptz as a Date. */
export const { toToken, toDelivery, toAttempt } = recordReaders((value) => value as Date)
