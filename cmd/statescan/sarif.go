package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"os"
	"strings"

	"github.com/stateseal/stateseal/scan"
)

// SARIF 2.1.0 (OASIS), the subset GitHub code scanning reads: one rule
// per check, one result per failed check. A black-box scan has no
// source line; GitHub wants each result at a repository path all the
// same, so a result points at -sarif-location (the server's entry
// point, say), by default the URL's host and path written as one
// (127.0.0.1_8080/mcp), and carries the URL itself in its properties.

type sarifLog struct {
	Schema  string     `json:"$schema"`
	Version string     `json:"version"`
	Runs    []sarifRun `json:"runs"`
}

type sarifRun struct {
	Tool        sarifTool         `json:"tool"`
	Invocations []sarifInvocation `json:"invocations"`
	Results     []sarifResult     `json:"results"`
}

type sarifTool struct {
	Driver sarifDriver `json:"driver"`
}

type sarifDriver struct {
	Name           string      `json:"name"`
	InformationURI string      `json:"informationUri"`
	Version        string      `json:"version"`
	SemVer         string      `json:"semanticVersion,omitempty"`
	Rules          []sarifRule `json:"rules"`
}

type sarifText struct {
	Text string `json:"text"`
}

type sarifRule struct {
	ID                   string         `json:"id"`
	Name                 string         `json:"name"`
	ShortDescription     sarifText      `json:"shortDescription"`
	FullDescription      sarifText      `json:"fullDescription"`
	Help                 sarifText      `json:"help"`
	DefaultConfiguration sarifConfig    `json:"defaultConfiguration"`
	Properties           map[string]any `json:"properties"`
}

type sarifConfig struct {
	Level string `json:"level"`
}

type sarifInvocation struct {
	ExecutionSuccessful bool                `json:"executionSuccessful"`
	Notifications       []sarifNotification `json:"toolExecutionNotifications,omitempty"`
}

type sarifNotification struct {
	Level   string    `json:"level"`
	Message sarifText `json:"message"`
}

type sarifResult struct {
	RuleID              string            `json:"ruleId"`
	RuleIndex           int               `json:"ruleIndex"`
	Level               string            `json:"level"`
	Message             sarifText         `json:"message"`
	Locations           []sarifLocation   `json:"locations"`
	PartialFingerprints map[string]string `json:"partialFingerprints"`
	Properties          map[string]any    `json:"properties"`
}

type sarifLocation struct {
	PhysicalLocation struct {
		ArtifactLocation struct {
			URI string `json:"uri"`
		} `json:"artifactLocation"`
	} `json:"physicalLocation"`
}

// level is a severity as a SARIF level.
func level(s scan.Severity) string {
	switch s {
	case scan.High:
		return "error"
	case scan.Medium:
		return "warning"
	case scan.Low:
		return "note"
	}
	return "none"
}

// securitySeverity is GitHub's score for a severity: high 7.0-8.9,
// medium 4.0-6.9, low 0.1-3.9.
func securitySeverity(s scan.Severity) string {
	switch s {
	case scan.High:
		return "8.0"
	case scan.Medium:
		return "5.0"
	case scan.Low:
		return "3.0"
	}
	return "0.0"
}

// specText is a check's spec sentence with its source named, or, for an
// observation no requirement backs, says so.
func specText(spec string) string {
	if rest, ok := strings.CutPrefix(spec, "none: "); ok {
		return "No MCP 2026-07-28 requirement (an observation, never a finding): " + rest
	}
	return "MCP 2026-07-28, Multi Round-Trip Requests, " + spec
}

// location is the repository path a result points at: the URL's host
// (a port as _PORT) and path.
func location(target, given string) string {
	if given != "" {
		return given
	}
	u, err := url.Parse(target)
	if err != nil || u.Host == "" {
		return "statescan"
	}
	return strings.ReplaceAll(u.Host, ":", "_") + strings.TrimRight(u.EscapedPath(), "/")
}

// sarif makes rep's SARIF log.
func sarif(rep *scan.Report, loc string) *sarifLog {
	run := sarifRun{
		Tool: sarifTool{Driver: sarifDriver{
			Name:           "statescan",
			InformationURI: "https://github.com/stateseal/stateseal/blob/main/docs/SCAN.md",
			// statescan's own version, so that a finding names the
			// scanner that made it; the report format is SARIF's own
			// version, 2.1.0, below.
			Version: version(),
			SemVer:  semver(version()),
		}},
		// A scan whose checks ran out of requests did not do what it
		// was asked: not a successful run, whatever it found.
		Invocations: []sarifInvocation{{ExecutionSuccessful: rep.Judged() && rep.OverBudget() == 0}},
		Results:     []sarifResult{},
	}
	if rep.Reason != "" {
		run.Invocations[0].Notifications = []sarifNotification{{Level: "error", Message: sarifText{"nothing judged: " + rep.Reason}}}
	} else if rep.OverBudget() > 0 {
		run.Invocations[0].Notifications = []sarifNotification{{Level: "error", Message: sarifText{overBudget(rep)}}}
	}
	index := map[string]int{}
	for _, c := range scan.Checks {
		if c.ID == "baseline" {
			continue
		}
		index[c.ID] = len(run.Tool.Driver.Rules)
		props := map[string]any{"tags": []string{"security", "mcp", "requestState"}, "severity": string(c.Severity)}
		if c.Severity != scan.None {
			props["security-severity"] = securitySeverity(c.Severity)
		}
		run.Tool.Driver.Rules = append(run.Tool.Driver.Rules, sarifRule{
			ID:                   c.ID,
			Name:                 c.ID,
			ShortDescription:     sarifText{"statescan " + c.ID + ": sends " + c.Sends},
			FullDescription:      sarifText{specText(c.Spec)},
			Help:                 sarifText{"docs/SCAN.md, \"The checks\", row " + c.ID + ": what a fail proves and the fix. The spec sentence it tests: " + c.Spec},
			DefaultConfiguration: sarifConfig{Level: level(c.Severity)},
			Properties:           props,
		})
	}
	loc = location(rep.Target, loc)
	for _, f := range rep.Checks {
		if f.Result != scan.Fail {
			continue
		}
		i, ok := index[f.ID]
		if !ok {
			continue
		}
		sum := sha256.Sum256([]byte(rep.Target + "\x00" + f.Tool + "\x00" + f.ID))
		r := sarifResult{
			RuleID:    f.ID,
			RuleIndex: i,
			Level:     level(f.Severity),
			Message:   sarifText{f.ID + " on " + f.Tool + " at " + rep.Target + ": " + f.Detail},
			// A finding is the same finding on the next run: its
			// check, its target and the server's URL.
			PartialFingerprints: map[string]string{"statescan/v1": hex.EncodeToString(sum[:16])},
			Properties:          map[string]any{"target": rep.Target, "tool": f.Tool, "severity": string(f.Severity), "security-severity": securitySeverity(f.Severity)},
		}
		var l sarifLocation
		l.PhysicalLocation.ArtifactLocation.URI = loc
		r.Locations = []sarifLocation{l}
		run.Results = append(run.Results, r)
	}
	return &sarifLog{Schema: "https://json.schemastore.org/sarif-2.1.0.json", Version: "2.1.0", Runs: []sarifRun{run}}
}

// writeSARIF writes rep's SARIF log to file.
func writeSARIF(file string, rep *scan.Report, loc string) error {
	b, err := json.MarshalIndent(sarif(rep, loc), "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(file, append(b, '\n'), 0o644)
}
