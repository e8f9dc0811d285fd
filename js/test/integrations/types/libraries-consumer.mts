// The adapters' types against the real libraries' own (package-node.test.mjs compiles it with
// tsc --module nodenext --strict and runs it): each README one-liner type-checks where the
// library declares the option, and runs (no request is made).
import OpenAI from 'openai'
import Anthropic from '@anthropic-ai/sdk'
import ky from 'ky'
import { Octokit } from '@octokit/core'
import { Client, GatewayIntentBits } from 'discord.js'
import { REST } from '@discordjs/rest'
import { Agent } from 'undici'
import { RateLimiter, ratelaneFetch } from 'ratelane'
import { interceptor } from 'ratelane/undici'
import { discordRest } from 'ratelane/discordjs'
import { ratelaneOctokit } from 'ratelane/octokit'

const openaiFetch = ratelaneFetch({ profile: 'openai' })
const openai = new OpenAI({ apiKey: 'test', fetch: openaiFetch })
const anthropicFetch = ratelaneFetch({ profile: 'anthropic' })
const anthropic = new Anthropic({ apiKey: 'test', fetch: anthropicFetch })
const kyFetch = ratelaneFetch({ profile: 'ietf' })
const api = ky.create({ prefixUrl: 'https://api.example.com', fetch: kyFetch })
const octokitFetch = ratelaneFetch({ profile: 'github' })
const octokit = new Octokit({ request: { fetch: octokitFetch } })
const agent = new Agent().compose(interceptor(new RateLimiter(), { origins: 'https://discord.com' }))
const rest = discordRest({ maxWait: 30_000 })
const client = new Client({ intents: [GatewayIntentBits.Guilds], rest })
const manager = new REST(discordRest({}))
const MyOctokit = Octokit.plugin(ratelaneOctokit)
const throttled = new MyOctokit({ throttle: { onRateLimit: () => true, onSecondaryRateLimit: () => false } })

const made = [openai, anthropic, api, octokit, agent, client, manager, throttled].every((x) => x !== undefined)
await Promise.all([openaiFetch, anthropicFetch, kyFetch, octokitFetch].map((f) => f.limiter.close()))
await rest.limiter.close()
await throttled.ratelane?.limiter.close()
await client.destroy()
await agent.close()
console.log(JSON.stringify({ form: 'libraries', checks: { made } }))
