/** The `webhooks` section: what a subscriber receives for every new plant (Standard Webhooks). */
const signedHeader = (description: string) => ({
  required: true,
  schema: { type: 'string' },
  description,
})

export const newPlantWebhook = {
  newPlant: {
    post: {
      operationId: 'newPlantWebhook',
      // Deliveries are proven by the webhook-signature header below, an HMAC no OpenAPI security
      // scheme models; a scheme would also show in /docs' Authorize, where only the bearer token belongs.
      security: [],
      summary: 'A plant was created',
      description:
        'Sent to every subscriber once per created plant (not for an idempotent replay), signed per the ' +
        'Standard Webhooks specification. Verify: HMAC-SHA256, keyed with the base64-decoded part of the ' +
        'secret after `whsec_`, over `{webhook-id}.{webhook-timestamp}.{raw body}`; compare in constant time ' +
        'with each `v1,` entry of webhook-signature and reject timestamps more than 5 minutes away. Any 2xx ' +
        'acknowledges; anything else, a timeout or a connection error is retried with exponential backoff ' +
        'and jitter for about 24 hours, then marked failed. Deduplicate on webhook-id. An event announces a ' +
        'creation: a plant deleted before its event is delivered is still announced.',
      parameters: [
        {
          in: 'header',
          name: 'webhook-id',
          ...signedHeader('Event id, stable across retries of one event.'),
        },
        {
          in: 'header',
          name: 'webhook-timestamp',
          ...signedHeader('Unix seconds when this attempt was signed.'),
        },
        {
          in: 'header',
          name: 'webhook-signature',
          ...signedHeader('`v1,` + base64 HMAC-SHA256 of `id.timestamp.body`; re-signed on every attempt.'),
        },
      ],
      requestBody: {
        required: true,
        description: 'The created plant as a NewPlant, `id` printed exactly.',
        content: {
          'application/json': {
            schema: { $ref: '#/components/schemas/NewPlant' },
            example: { id: 10, name: 'Monstera', tag: 'indoor' },
          },
        },
      },
      responses: {
        '2XX': { description: 'Any 2xx status acknowledges the delivery.' },
      },
    },
  },
}
