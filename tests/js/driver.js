// Sabaki's GTP controller (@sabaki/gtp, the library Sabaki itself uses) driving a GTP engine through a whole game and
// two analysis sessions; prints what it saw as one JSON object on stdout for tests/test_gtp_engine.py to check.
//
//   node tests/js/driver.js MAX_MOVES -- ENGINE [ARGS...]
//
// The game: boardsize 9, komi 7.5, clear_board, then genmove B, genmove W, ... until two passes in a row, a
// resignation, a failure response or MAX_MOVES moves; then final_score. The analysis: on a fresh board after B E5,
// `lz-analyze W 1` until 5 info lines have come, stopped by the next command (`name`); then `kata-analyze B 1` until
// 3 lines, stopped by `final_score`; then `quit`, and the engine's exit status.
'use strict'

const {Controller} = require('@sabaki/gtp')

const DEADLINE_MS = 240000 // the whole session; the test's own timeout is longer

async function analyse(engine, name, args, wanted, stopCommand) {
  const lines = []
  let enough
  const gotEnough = new Promise(resolve => (enough = resolve))
  const analysis = engine.sendCommand({name, args}, ({line}) => {
    if (line.startsWith('info')) lines.push(line)
    if (lines.length >= wanted) enough()
  })
  await Promise.race([gotEnough, analysis])
  const stop = engine.sendCommand(stopCommand) // the next command: the engine must end the analysis first
  const response = await analysis
  const next = await stop
  return {lines, response, stop: next}
}

async function main() {
  const argv = process.argv.slice(2)
  const maxMoves = parseInt(argv[0], 10)
  if (argv[1] !== '--' || !(maxMoves > 0) || argv.length < 3) {
    throw new Error('usage: node driver.js MAX_MOVES -- ENGINE [ARGS...]')
  }
  const engine = new Controller(argv[2], argv.slice(3), {env: process.env})
  const stderr = []
  engine.on('stderr', ({content}) => stderr.push(content))
  const timer = setTimeout(() => {
    process.stdout.write(JSON.stringify({timeout: true, stderr: stderr.slice(-20)}) + '\n')
    engine.kill().then(() => process.exit(3))
  }, DEADLINE_MS)
  const out = {setup: {}, moves: [], failures: []}
  engine.start()
  engine.process.on('exit', (code, signal) => (out.exit = {code, signal}))

  const send = async (name, args = []) => {
    const response = await engine.sendCommand({name, args})
    if (response.error) out.failures.push({command: [name, ...args].join(' '), response})
    return response
  }
  for (const name of ['protocol_version', 'name', 'version', 'list_commands']) {
    out.setup[name] = await send(name)
  }
  await send('boardsize', ['9'])
  await send('komi', ['7.5'])
  await send('clear_board')

  let colour = 'B'
  let passes = 0
  const started = Date.now()
  while (out.moves.length < maxMoves) {
    const response = await send('genmove', [colour])
    if (response.error) break
    const move = response.content
    out.moves.push(move)
    if (move.toLowerCase() === 'resign') break
    passes = move.toLowerCase() === 'pass' ? passes + 1 : 0
    if (passes >= 2) break
    colour = colour === 'B' ? 'W' : 'B'
  }
  out.game_seconds = (Date.now() - started) / 1000
  out.final_score = await send('final_score')

  await send('clear_board')
  await send('play', ['B', 'E5'])
  out.lz = await analyse(engine, 'lz-analyze', ['W', '1'], 5, {name: 'name'})
  out.kata = await analyse(engine, 'kata-analyze', ['B', '1'], 3, {name: 'final_score'})

  await engine.stop()
  clearTimeout(timer)
  out.stderr = stderr.slice(-20)
  process.stdout.write(JSON.stringify(out) + '\n')
}

main().catch(err => {
  process.stdout.write(JSON.stringify({error: String(err && err.stack ? err.stack : err)}) + '\n')
  process.exit(1)
})
