export { PlantStoreClient, type ClientOptions } from './client.js'
export { PlantStoreError, type ClientErrorCode } from './errors.js'
export { verifyWebhook, WebhookVerificationError } from './webhook.js'
export type * from './types.js'
