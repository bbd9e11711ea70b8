package faults

import (
	"github.com/twmb/franz-go/pkg/kadm"

	"imlab/chaos"
)

// KafkaRecordLoss deletes the run's topic's records up to the end
// offsets.
type KafkaRecordLoss struct{ kafkaKind }

// Name is "kafka_record_loss".
func (KafkaRecordLoss) Name() string { return "kafka_record_loss" }

// Unit: the records deleted (consumed ones too, so not the messages
// lost).
func (KafkaRecordLoss) Unit() string { return "records deleted, already consumed or not" }

// Build is the record loss on the run's topic.
func (KafkaRecordLoss) Build(_ Spec, env Env) (chaos.Fault, error) {
	return kafkaFault(env, chaos.KafkaRecordLoss)
}

// kafkaKind is what the Kafka kinds share: no target, no parameters, a
// file that uses Kafka.
type kafkaKind struct{}

// Params: none.
func (kafkaKind) Params() []string { return nil }

// CheckTarget: none.
func (kafkaKind) CheckTarget(field string, x Spec, _ Context) error { return noTarget(field, x) }

// CheckValues: a policy that uses Kafka.
func (kafkaKind) CheckValues(field string, x Spec, c Context) error {
	if !c.UsesKafka {
		return invalid(field+".kind", "%s needs a policy that uses Kafka (store, outbox or queue)", x.Kind)
	}
	return nil
}

// kafkaFault is the fault build makes on the run's topic.
func kafkaFault(env Env, build func(*kadm.Client, string) chaos.Fault) (chaos.Fault, error) {
	adm, err := env.Kafka()
	if err != nil {
		return nil, err
	}
	return build(adm, env.Topic), nil
}
