// The runner child as a process group (lambda.mjs): it is started in a session and process group of
// its own (setsid), and stopped, resumed and killed as a group, so that whatever it forks (possible
// only past Node's permission model, which lets it start no process) is stopped and killed with it,
// not left running past the stop between invocations or the kill. Under the seccomp launcher
// (launcher/launcher.c) setsid() and setpgid() fail, so no descendant can leave the group.
import { spawn } from 'node:child_process'
import fs from 'node:fs'

// A child leading a process group of its own (its pgid is its pid).
export function spawnGroup(command, args, options) {
  return spawn(command, args, { ...options, detached: true })
}

// Signals every process of the child's group; false when none is left. Its pid names the group as
// long as any process of it lives (the kernel reuses no pid still in use as a process group id).
export function signalGroup(proc, signal) {
  try {
    process.kill(-proc.pid, signal)
    return true
  } catch {
    try {
      proc.kill(signal) // not started as a group leader (or already gone): the child itself
    } catch {}
    return false
  }
}

function statFields(pid) {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'latin1')
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ') // [state, ppid, pgrp, ...]
}

// The pids of the processes in the process group `pgid` (the child and whatever it forked).
export function members(pgid) {
  const pids = []
  let entries = []
  try {
    entries = fs.readdirSync('/proc')
  } catch {
    return pids
  }
  for (const name of entries) {
    if (!/^\d+$/.test(name)) continue
    try {
      if (Number(statFields(name)[2]) === pgid) pids.push(Number(name))
    } catch {} // it ended meanwhile
  }
  return pids
}

// The state letters of a process's threads ('T' stopped, 'Z' zombie, 'X' gone).
export function threadStates(pid) {
  try {
    return fs.readdirSync(`/proc/${pid}/task`).map((tid) => {
      try {
        const stat = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'latin1')
        return stat[stat.lastIndexOf(')') + 2]
      } catch {
        return 'X' // the thread ended
      }
    })
  } catch {
    return [] // the process is gone
  }
}

// The state letters of every thread of every process in the group.
export function groupStates(pgid) {
  const pids = members(pgid)
  if (!pids.includes(pgid)) pids.push(pgid)
  return pids.flatMap(threadStates)
}

export const gone = (states) => states.every((s) => s === 'Z' || s === 'X')
export const stopped = (states) => states.every((s) => s === 'T' || s === 'Z' || s === 'X')
