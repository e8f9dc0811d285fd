// Types of `ratelane/discordjs` (discordjs.js): the adapter types are js/adapters/adapters.d.ts.
export { discordRest } from './adapters'
export type { DiscordRestOptions, DiscordRest } from './adapters'
