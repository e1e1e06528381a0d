/**
 * Mirror health probing (issue 5): public entry points.
 */
export {ProbeConfigSchema, type ProbeConfig} from './config.js'
export {ProbeClient, classifyError, classifyStatus, isNonGlobalAddress, mirrorFileUrl, systemResolver, type Family, type ReasonCode, type Resolver} from './http.js'
export {probeMirror, type CheckResult, type MirrorProbeResult, type ProbeRequest, type ProbeTarget} from './probe.js'
export {chooseRequest, clearNeedsRescan, nextState, parseStatus, recordProbe, type CheckState, type ProbeStatus} from './state.js'
export {probeMirrors, type MirrorRoundResult, type ProbeRound} from './run.js'
export {probeFile, type FileProbeResult, type FileProbeRow} from './file.js'
export {nagiosUnknown, nagiosVerdict, NAGIOS_EXIT} from './nagios.js'
export {probeSummaries, recentProbes, recentTransitions, type ProbeSummary, type TransitionRecord} from './history.js'
export {startBackgroundProbes, type BackgroundProbes} from './background.js'
